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

    /// The wait before the retry that follows failed attempt `attempt` (1-based). Total: it never
    /// traps. A negative or not-a-number wait is zero; an exponential wait that outgrows `maximum` (or
    /// what a `Duration` holds) is capped; a jitter outside 0...1 is clamped (not-a-number: none).
    /// `retry` refuses such arguments up front (see ``invalidReason``).
    public func delay(afterAttempt attempt: Int) -> Duration {
        switch self {
        case .none:
            return .zero
        case .constant(let wait):
            return max(wait, .zero)
        case .exponential(let initial, let multiplier, let maximum, let jitter):
            let cap = max(Self.seconds(maximum), 0)
            var grown = max(Self.seconds(initial), 0) * pow(multiplier, Double(max(attempt, 1) - 1))
            if grown.isNaN || grown > cap { grown = cap }
            if grown < 0 { grown = 0 }
            let share = jitter.isNaN ? 0 : min(max(jitter, 0), 1)
            let spread = grown * share
            return Self.duration(seconds: spread > 0 ? grown - Double.random(in: 0...spread) : grown)
        case .custom(let wait):
            return max(wait(attempt), .zero)
        }
    }

    /// Why `retry` refuses this delay (a sentence for its `invalidArgument` error), or nil: a negative
    /// `constant` or `initial`/`maximum`, a `multiplier` that is negative or not finite, a `jitter`
    /// that is not a number.
    public var invalidReason: String? {
        switch self {
        case .none, .custom:
            return nil
        case .constant(let wait):
            return wait < .zero ? "a constant delay of \(wait) is negative; use 0 or more" : nil
        case .exponential(let initial, let multiplier, let maximum, let jitter):
            if initial < .zero { return "the initial delay \(initial) is negative; use 0 or more" }
            if maximum < .zero { return "the maximum delay \(maximum) is negative; use 0 or more" }
            if !multiplier.isFinite || multiplier < 0 {
                return "the multiplier \(multiplier) is not a finite number of 0 or more (2 doubles each wait)"
            }
            if jitter.isNaN { return "the jitter is not a number; use a share of the wait in 0...1" }
            return nil
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// `seconds` (finite, 0 or more) as a `Duration`, capped at what one holds.
    private static func duration(seconds: Double) -> Duration {
        guard seconds > 0 else { return .zero }
        let whole = seconds.rounded(.down)
        guard whole < 9.2e18 else { return Duration(secondsComponent: .max, attosecondsComponent: 0) }
        return Duration(secondsComponent: Int64(whole), attosecondsComponent: Int64((seconds - whole) * 1e18))
    }
}

extension Command {
    /// Runs the command `make` returns, and on failure a fresh one, up to `retries` more times.
    ///
    /// *Emits:* every value of every attempt, failed ones included. *Completes:* when an attempt
    /// completes. *Fails:* with the last error after `retries + 1` failed attempts (`retry(0)` never
    /// retries), when `make` throws, or at once with `CommandError/Code/invalidArgument` if
    /// `retries` is negative or `delay` is invalid (``RetryDelay/invalidReason``). *Cancels:* the running attempt, or the pending wait.
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
            if let reason = delay.invalidReason {
                return link.emit(
                    .failed(
                        CommandError(
                            code: .invalidArgument, command: link.node,
                            message: "retry(\(retries), delay:): \(reason).")))
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
