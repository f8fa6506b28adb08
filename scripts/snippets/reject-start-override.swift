// must not compile
// expect-error: overrides a 'final' instance method
// A command's start() is final: override run(_:).
import CommandCore
import Foundation

final class Started: Command<Int>, @unchecked Sendable {
    override func start() {}
}
