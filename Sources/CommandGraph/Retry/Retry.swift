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
            let cap = max(maximum.inSeconds, 0)
            var grown = max(initial.inSeconds, 0) * pow(multiplier, Double(max(attempt, 1) - 1))
            if grown.isNaN || grown > cap { grown = cap }
            if grown < 0 { grown = 0 }
            let share = jitter.isNaN ? 0 : min(max(jitter, 0), 1)
            let spread = grown * share
            return Duration(clampingSeconds: spread > 0 ? grown - Double.random(in: 0...spread) : grown)
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
}

/// A failed attempt of `Command.retry(_:delay:scheduler:shouldRetry:_:)`, for its `shouldRetry`.
public struct RetryFailure: Sendable {
    /// The error the attempt failed with.
    public let error: any Error
    /// Which attempt failed (1-based: the first attempt is 1).
    public let attempt: Int
    /// Every attempt's error so far, in order (`errors.last` is `error`).
    public let errors: [any Error]
}

/// The attempt `Command.retry(_:delay:scheduler:shouldRetry:_:)` asks `make` for.
public struct RetryAttempt: Sendable {
    /// Which attempt this is (1-based: the first attempt is 1).
    public let number: Int
    /// The error the previous attempt failed with (nil for the first).
    public let lastError: (any Error)?
}

/// What `retry` does after a failed attempt, as `shouldRetry` decides.
public enum RetryDecision: Sendable {
    /// The next attempt, after `retry`'s `delay`.
    case retry
    /// The next attempt after this wait instead (a server's `Retry-After`, say); a negative wait is 0.
    case retryWithDelay(Duration)
    /// Runs this command first ("refresh the token"), then the next attempt, at once. If it fails, the
    /// retry fails with *its* error and makes no further attempt; if it is cancelled, the retry ends
    /// cancelled. Its values are ignored.
    case recover(Command<Void>)
    /// No further attempt: the retry fails now with the attempt's error.
    case doNotRetry
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
        retry(retries, delay: delay, scheduler: scheduler, shouldRetry: { _ in .retry }) { _ in try make() }
    }

    /// Runs the command `make` returns, and after a failed attempt asks `shouldRetry` what to do
    /// (ProcedureKit's `RetryProcedure` with its failure info, Alamofire's `RequestRetrier`):
    ///
    /// ```swift
    /// let fetch = Command<Data>.retry(3, delay: .exponential(initial: .milliseconds(100)),
    ///     shouldRetry: { failure in
    ///         if failure.error is Unauthorized { return .recover(RefreshToken()) }
    ///         return failure.error is URLError ? .retry : .doNotRetry
    ///     }) { attempt in FetchCommand(url, token: store.token) }
    /// ```
    ///
    /// `retries` bounds the attempts (`retries + 1` at most, recoveries not counted): after the last
    /// one fails, the retry fails with its error without asking `shouldRetry`. `shouldRetry` and
    /// `make` run on the thread where the previous step ended (or the caller's, for the first `make`).
    ///
    /// *Emits:* every value of every attempt, failed ones included. *Completes:* when an attempt
    /// completes. *Fails:* with the attempt's error (`.doNotRetry`, or attempts exhausted), a recovery
    /// command's error, what `make` throws, or `invalidArgument` for a negative count or an invalid
    /// `delay`. *Cancels:* the running attempt, the pending wait or the running recovery command.
    public static func retry(
        _ retries: Int, delay: RetryDelay = .none, scheduler: any CommandScheduler = DispatchScheduler.shared,
        shouldRetry: @escaping @Sendable (RetryFailure) -> RetryDecision,
        _ make: @escaping @Sendable (RetryAttempt) throws -> Command<Output>
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
            @Sendable func attempt(_ number: Int, errors: [any Error]) {
                let command: Command<Output>
                do {
                    command = try make(RetryAttempt(number: number, lastError: errors.last))
                } catch {
                    return link.emit(.failed(error))
                }
                link.subscribe(runTime: command) { event in
                    switch event {
                    case .value(let value): link.emit(.value(value))
                    case .completed, .cancelled: link.forwardTerminal(event, from: command)
                    case .failed(let error):
                        guard number <= retries else { return link.emit(.failed(error)) }
                        let errors = errors + [error]
                        let next: @Sendable () -> Void = { attempt(number + 1, errors: errors) }
                        switch shouldRetry(RetryFailure(error: error, attempt: number, errors: errors)) {
                        case .doNotRetry:
                            link.emit(.failed(error))
                        case .retry:
                            pause(delay.delay(afterAttempt: number), then: next)
                        case .retryWithDelay(let duration):
                            pause(max(duration, .zero), then: next)
                        case .recover(let recovery):
                            link.subscribe(runTime: recovery) { event in
                                switch event {
                                case .value: break
                                case .completed: next()
                                case .failed(let error): link.emit(.failed(error))
                                case .cancelled: link.forwardTerminal(event, from: recovery)
                                }
                            }
                        }
                    }
                }
            }
            @Sendable func pause(_ duration: Duration, then next: @escaping @Sendable () -> Void) {
                if duration <= .zero { return next() }
                link.schedule(on: scheduler, after: duration, next)
            }
            attempt(1, errors: [])
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
