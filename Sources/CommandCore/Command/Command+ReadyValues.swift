import Foundation

// Commands whose outcome is known when they are made: Combine's `Just`, `Empty`, `Fail` and ReactiveCocoa's
// `return:`, `empty`, `error:`, `never`, for `flatMap`, `catch`, tests, and the places a command is
// required but the answer is already there.
extension Command {
    /// Sends `value` and completes when it runs (Combine's `Just`, ReactiveCocoa's `return:`).
    ///
    /// A real command: executed, observed, depended on or added to a queue like any other, and it runs
    /// once. Executed by the engine (`execute`, a dependent, a combinator), it runs in place on the
    /// executing thread, with no queue hop; started by a queue of yours, on that queue. Cancelled
    /// before it ran, it ends cancelled without a value. A `flatMap` whose inner it is, while nothing
    /// else has touched it, reads its value without running it (no observer, no walk, no run: it stays
    /// pending, and executing it later runs it with the same outcome).
    @inlinable
    public static func just(_ value: Output) -> Command<Output> {
        // Inlinable: made where `Output` is known, the class's metadata is a cached load, not a look-up.
        JustCommand(value)
    }

    /// Completes without a value when it runs (Combine's `Empty`, ReactiveCocoa's `empty`). Where and
    /// when: as ``just(_:)``.
    public static var empty: Command<Output> { ReadyValueCommand(nil, name: "empty") }

    /// Fails with `error` when it runs (Combine's `Fail`, ReactiveCocoa's `error:`). Where and when:
    /// as ``just(_:)``.
    public static func fail(_ error: any Error) -> Command<Output> { ReadyValueCommand(error, name: "fail") }

    /// Never sends and never ends by itself (ReactiveCocoa's `never`): it runs (in place, as
    /// ``just(_:)``) and waits until it is cancelled, holding no thread; the cancel ends it cancelled.
    public static var never: Command<Output> {
        let command = Command<Output> { result in
            // The result is kept by the cancelable (which the command keeps while it runs): released
            // without a terminal event it would report `resultAbandoned`.
            BlockCancelable { withExtendedLifetime(result) {} }
        }
        command.name = "never"
        command.runsInPlace()
        return command
    }
}

/// `Command.just`: the value stored, no closure; runs in place, and a combinator may read the value
/// while nothing else touched it (see `CommandStateMachine.QueueSettings.readyValue`).
@usableFromInline
final class JustCommand<Output: Sendable>: Command<Output>, @unchecked Sendable {
    // `@unchecked Sendable`: its own stored property is immutable; the rest is `Command`'s.
    private let stored: Output

    @usableFromInline
    init(_ value: Output) {
        stored = value
        super.init()
        markReadyValue(name: "just")
    }

    override func readyOutcome(_ deliver: (Output) -> Void) -> Termination? {
        deliver(stored)
        return .completed
    }

    override func run(_ result: CommandResult<Output>) -> (any Cancelable)? {
        result.succeed(stored)
        return nil
    }
}

/// `Command.empty` (no error) and `Command.fail` (its error): as ``JustCommand``, without a value.
final class ReadyValueCommand<Output: Sendable>: Command<Output>, @unchecked Sendable {
    // `@unchecked Sendable`: its own stored property is immutable; the rest is `Command`'s.
    private let error: (any Error)?

    init(_ error: (any Error)?, name: String) {
        self.error = error
        super.init()
        markReadyValue(name: name)
    }

    override func readyOutcome(_ deliver: (Output) -> Void) -> Termination? {
        error.map { .failed($0) } ?? .completed
    }

    override func run(_ result: CommandResult<Output>) -> (any Cancelable)? {
        if let error { result.fail(error) } else { result.complete() }
        return nil
    }
}

extension Command {
    /// Names a ready-value command and marks it to run in place, or to be read without running by a
    /// combinator that is its only user.
    func markReadyValue(name: String) {
        machine.withLock { machine in
            machine.name = name
            machine.queue.inPlace = true
            machine.queue.readyValue = true
        }
    }
}
