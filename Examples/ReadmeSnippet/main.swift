import CommandCore
import Foundation

final class Add: Command<Int>, @unchecked Sendable {  // subclasses of Operation restate @unchecked Sendable
    let a: Int, b: Int
    init(_ a: Int, _ b: Int) { self.a = a; self.b = b; super.init() }
    override func run(_ result: CommandResult<Int>) -> (any Cancelable)? {
        result.succeed(a + b)  // onNext + onComplete
        return nil
    }
}

let slow = Command<String> { result in  // no subclass: a closure
    DispatchQueue.global().asyncAfter(deadline: .now() + 5) {
        if !result.isCancelled { result.succeed("done") }
    }
    return BlockCancelable { print("stopped") }  // what cancel() calls
}

Add(2, 3).execute { event in print(event) }  // value(5), completed: on the caller's queue
let token = slow.execute { event in print(event) }  // cancelled(...)
token.cancel()  // same as slow.cancel()
