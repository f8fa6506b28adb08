import Foundation

// Commands whose outcome is known when they are made: Combine's `Just`, `Empty`, `Fail` and ReactiveCocoa's
// `return:`, `empty`, `error:`, `never`, for `flatMap`, `catch`, tests, and the places a command is
// required but the answer is already there.
extension Command {
    /// Sends `value` and completes when it runs (Combine's `Just`, ReactiveCocoa's `return:`).
    ///
    /// A real command: executed, observed, depended on or added to a queue like any other, and it runs
    /// once. Executed by the engine (`execute`, a dependent, a combinator such as `flatMap`), it runs
    /// in place on the executing thread, with no queue hop; started by a queue of yours, on that
    /// queue. Cancelled before it ran, it ends cancelled without a value.
    public static func just(_ value: Output) -> Command<Output> {
        ready("just") { $0.succeed(value) }
    }

    /// Completes without a value when it runs (Combine's `Empty`, ReactiveCocoa's `empty`). Where and
    /// when: as ``just(_:)``.
    public static var empty: Command<Output> {
        ready("empty") { $0.complete() }
    }

    /// Fails with `error` when it runs (Combine's `Fail`, ReactiveCocoa's `error:`). Where and when:
    /// as ``just(_:)``.
    public static func fail(_ error: any Error) -> Command<Output> {
        ready("fail") { $0.fail(error) }
    }

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

    private static func ready(_ name: String, _ end: @escaping @Sendable (CommandResult<Output>) -> Void)
        -> Command<Output>
    {
        let command = Command<Output> { result in
            end(result)
            return nil
        }
        command.name = name
        command.runsInPlace()
        return command
    }
}
