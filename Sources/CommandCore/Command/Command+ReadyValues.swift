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
    public static func just(_ value: Output) -> Command<Output> { ReadyValueCommand(.value(value), name: "just") }

    /// Completes without a value when it runs (Combine's `Empty`, ReactiveCocoa's `empty`). Where and
    /// when: as ``just(_:)``.
    public static var empty: Command<Output> { ReadyValueCommand(.empty, name: "empty") }

    /// Fails with `error` when it runs (Combine's `Fail`, ReactiveCocoa's `error:`). Where and when:
    /// as ``just(_:)``.
    public static func fail(_ error: any Error) -> Command<Output> { ReadyValueCommand(.failure(error), name: "fail") }

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

/// `just`, `empty` and `fail`: the outcome stored, no closure; runs in place, and a combinator may read
/// the outcome while nothing else touched it (see `CommandStateMachine.QueueSettings.readyValue`).
final class ReadyValueCommand<Output: Sendable>: Command<Output>, @unchecked Sendable {
    // `@unchecked Sendable`: its own stored property is immutable; the rest is `Command`'s.
    enum Outcome: Sendable {
        case value(Output)
        case empty
        case failure(any Error)
    }

    private let outcome: Outcome

    init(_ outcome: Outcome, name: String) {
        self.outcome = outcome
        super.init()
        machine.withLock { machine in
            machine.name = name
            machine.queue.inPlace = true
            machine.queue.readyValue = true
        }
    }

    override func readyOutcome(_ value: (Output) -> Void) -> Termination? {
        switch outcome {
        case .value(let stored):
            value(stored)
            return .completed
        case .empty: return .completed
        case .failure(let error): return .failed(error)
        }
    }

    override func run(_ result: CommandResult<Output>) -> (any Cancelable)? {
        switch outcome {
        case .value(let value): result.succeed(value)
        case .empty: result.complete()
        case .failure(let error): result.fail(error)
        }
        return nil
    }
}
