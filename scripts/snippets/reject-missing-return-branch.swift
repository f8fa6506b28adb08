// must not compile
// expect-error: missing return in closure expected to return '(any Cancelable)?'
// A closure that returns a cancelable on one path must return one (or nil) on every path.
import CommandCore
import Foundation

let command = Command<Int> { result in
    if Bool.random() {
        return BlockCancelable {}
    }
    result.succeed(1)
}
