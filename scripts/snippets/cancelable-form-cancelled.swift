// must compile; await: slow
// expect: cancelled(CommandError.cancelled (Command<String>): 'Command<String>' was cancelled.)
// The README's closure command, cancelled through its token before its run began: `run` is never
// called, so nothing prints "stopped"; the observer gets the cancel.
import CommandCore
import Foundation

let slow = Command<String> { result in  // no subclass: a closure
    DispatchQueue.global().asyncAfter(deadline: .now() + 5) {
        if !result.isCancelled { result.succeed("done") }
    }
    return BlockCancelable { print("stopped") }  // what cancel() calls
}
let token = slow.execute { event in print(event) }  // cancelled(...)
token.cancel()  // same as slow.cancel()
