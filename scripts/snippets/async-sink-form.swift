// must compile; await: command
// expect: value(1)
// expect: value(2)
// expect: completed
// A trailing closure that awaits is the async sink form: returning completes the command.
import CommandCore
import Foundation

let command = Command<Int> { result in
    try await Task.sleep(nanoseconds: 1_000_000)
    result.send(1)
    result.send(2)
}
command.execute { print($0) }
