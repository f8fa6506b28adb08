// must compile; await: command
// expect: value(0)
// expect: stopped
// expect: cancelled(CommandError.cancelled (work): 'work' was cancelled.)
// A one-expression closure that returns a cancelable keeps it: cancel() calls it.
import CommandCore
import Foundation

func startWork(_ result: CommandResult<Int>) -> BlockCancelable {
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(10)) { result.send(0) }
    DispatchQueue.global().asyncAfter(deadline: .now() + 60) { result.succeed(1) }
    return BlockCancelable { print("stopped") }
}

let command = Command<Int> { result in startWork(result) }
command.name = "work"
command.execute { event in
    print(event)
    if case .value = event { command.cancel() }
}
