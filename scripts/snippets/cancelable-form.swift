// must compile; await: command
// expect: value(1)
// expect: completed
// The same closure with its `return nil`: the form whose closure returns what cancels the work.
import CommandCore
import Foundation

let command = Command<Int> { result in
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { result.succeed(1) }
    return nil
}
command.execute { print($0) }
