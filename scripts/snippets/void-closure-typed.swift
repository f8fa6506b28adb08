// must compile; await: command
// expect: starting
// expect: value(1)
// expect: completed
// Several statements with the closure's type named: the form that waits for the terminal event.
import CommandCore
import Foundation

let command = Command<Int> { (result) -> Void in
    print("starting")
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { result.succeed(1) }
}
command.execute { print($0) }
