import CommandCore
import Foundation

/// How long `retry` waits before attempt n + 1 (n counts failed attempts from 1).
public enum RetryDelay: Sendable {
    /// Retry at once.
    case none
    /// The same wait before every retry.
    case constant(Duration)
    /// `initial * multiplier^(n-1)`, capped at `maximum`, then spread by up to `jitter` (0...1) of
    /// itself at random (full jitter at 1).
    case exponential(initial: Duration, multiplier: Double = 2, maximum: Duration = .seconds(60), jitter: Double = 0)
    /// Any wait, from the number of failed attempts.
    case custom(@Sendable (Int) -> Duration)

    /// The wait before the retry that follows failed attempt `attempt` (1-based).
    public func delay(afterAttempt attempt: Int) -> Duration {
        switch self {
        case .none:
            return .zero
        case .constant(let wait):
            return wait
        case .exponential(let initial, let multiplier, let maximum, let jitter):
            let seconds = Double(initial.components.seconds) + Double(initial.components.attoseconds) / 1e18
            let grown = min(
                seconds * pow(multiplier, Double(attempt - 1)),
                Double(maximum.components.seconds) + Double(maximum.components.attoseconds) / 1e18)
            let spread = grown * min(max(jitter, 0), 1)
            return .nanoseconds(Int64((grown - Double.random(in: 0...spread)) * 1e9))
        case .custom(let wait):
            return wait(attempt)
        }
    }
}

extension Command {
    /// Runs the command `make` returns, and on failure a fresh one, up to `retries` more times.
    ///
    /// *Emits:* every value of every attempt, failed ones included. *Completes:* when an attempt
    /// completes. *Fails:* with the last error after `retries + 1` failed attempts (`retry(0)` never
    /// retries), when `make` throws, or at once with `CommandError/Code/invalidArgument` if
    /// `retries` is negative. *Cancels:* the running attempt, or the pending wait.
    /// - Parameters:
    ///   - delay: the wait before each retry, measured on `scheduler`.
    public static func retry(
        _ retries: Int, delay: RetryDelay = .none, scheduler: any CommandScheduler = DispatchScheduler.shared,
        _ make: @escaping @Sendable () throws -> Command<Output>
    ) -> Command<Output> {
        combinator("retry(\(retries))", inputs: []) { link in
            guard retries >= 0 else {
                return link.emit(
                    .failed(
                        CommandError(
                            code: .invalidArgument, command: link.node,
                            message:
                                "retry(\(retries)) needs a count of 0 or more (the number of retries after the first attempt)."
                        )))
            }
            @Sendable func attempt(_ number: Int) {
                let command: Command<Output>
                do { command = try make() } catch { return link.emit(.failed(error)) }
                link.subscribe(runTime: command) { event in
                    switch event {
                    case .value(let value): link.emit(.value(value))
                    case .completed, .cancelled: link.forwardTerminal(event, from: command)
                    case .failed(let error):
                        guard number <= retries else { return link.emit(.failed(error)) }
                        let wait = delay.delay(afterAttempt: number)
                        if wait <= .zero { return attempt(number + 1) }
                        link.schedule(on: scheduler, after: wait) { attempt(number + 1) }
                    }
                }
            }
            attempt(1)
        }
    }

    /// Retries this command's work by re-running `make` (a command runs once, so each retry needs a
    /// fresh one); see ``retry(_:delay:scheduler:_:)``. The first attempt is this command.
    public func retry(
        _ retries: Int, delay: RetryDelay = .none, scheduler: any CommandScheduler = DispatchScheduler.shared,
        with make: @escaping @Sendable () throws -> Command<Output>
    ) -> Command<Output> {
        let first = Locked<Command<Output>?>(self)
        return .retry(retries, delay: delay, scheduler: scheduler) {
            if let command = first.withLock({ command -> Command<Output>? in
                defer { command = nil }
                return command
            }) {
                return command
            }
            return try make()
        }
    }
}
