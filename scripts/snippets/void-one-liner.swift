// must compile; await: command
// expect: value(2)
// expect: completed
// A one-line closure that reports at once.
import CommandCore
import Foundation

let command = Command<Int> { result in result.succeed(2) }
command.execute { print($0) }
