// must not compile
// expect-error: overrides a 'final' property
// Readiness is the engine's: a command's isReady is final (Foundation's "override isReady" does not apply).
import CommandCore
import Foundation

final class Gated: Command<Int>, @unchecked Sendable {
    override var isReady: Bool { true }
}
