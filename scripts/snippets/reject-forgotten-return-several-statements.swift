// must not compile
// expect-error: missing return in closure expected to return '(any Cancelable)?'
// Several statements, no `return`, no `await`: rejected with a message that says what is missing
// (accepted, it would be the async form: completed when the closure returned, value(1) dropped).
import CommandCore
import Foundation

let command = Command<Int> { result in
    print("starting")
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { result.succeed(1) }
    // return nil   <- forgotten
}
command.execute { print($0) }
