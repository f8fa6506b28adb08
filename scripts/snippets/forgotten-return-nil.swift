// must compile; await: command
// expect: value(1)
// expect: completed
// The closure starts work for later and has no `return`: it picks the form that waits for the result.
import CommandCore
import Foundation

let command = Command<Int> { result in
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { result.succeed(1) }
    // return nil   <- forgotten
}
command.execute { print($0) }  // prints `completed`, never `value(1)`
