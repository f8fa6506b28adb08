import CommandGraph
import CommandTestSupport
import Testing

/// Marble diagrams on a virtual clock (one character per tick; see `Marbles` in `Support/`), one
/// per rule the operator's documentation states.
@Suite struct TimeMarbleTests {
    @Test func retry_runsAFreshAttemptUntilOneCompletes() {
        let m = Marbles()
        let scripts = Locked(["1#", "2#", "3|"])
        let output = Command<String>.retry(2, scheduler: m.scheduler) {
            m.input(scripts.withLock { $0.removeFirst() })
        }
        #expect(m.run(output) == "123|")
        let m2 = Marbles()
        #expect(m2.run(Command<String>.retry(0, scheduler: m2.scheduler) { m2.input("1#") }) == "1#")
    }

    @Test func retry_waitsTheDelayBetweenAttempts_andRefusesANegativeCount() {
        let m = Marbles()
        let output = Command<String>.retry(1, delay: .constant(m.tick * 2), scheduler: m.scheduler) { m.input("a#") }
        #expect(m.run(output) == "a--a#")
        let m2 = Marbles()
        #expect(m2.run(Command<String>.retry(-1, scheduler: m2.scheduler) { m2.input("a|") }) == "#")
    }

    /// Bad delays fail the retry at once with `invalidArgument` naming what is wrong (a negative
    /// initial delay with jitter, a NaN multiplier, ...), instead of trapping on a worker thread at
    /// the first failure; `delay(afterAttempt:)` itself never traps (an exponential that outgrows a
    /// `Duration` is capped).
    @Test func retry_refusesBadDelays_andDelaysNeverTrap() async {
        let bad: [RetryDelay] = [
            .exponential(initial: .milliseconds(-100), jitter: 0.5),
            .exponential(initial: .seconds(1), multiplier: .nan),
            .exponential(initial: .seconds(1), multiplier: -2),
            .exponential(initial: .seconds(1), maximum: .seconds(-1)),
            .exponential(initial: .seconds(1), jitter: .nan),
            .constant(.seconds(-1)),
        ]
        for delay in bad {
            let m = Marbles()
            let failure = Locked<CommandError?>(nil)
            let output = Command<String>.retry(2, delay: delay, scheduler: m.scheduler) { m.input("a#") }
            output.execute(on: .immediate) { event in
                if case .failed(let error) = event { failure.withLock { $0 = error as? CommandError } }
            }
            let error = failure.withLock { $0 }
            #expect(error?.code == .invalidArgument, "\(delay)")
            #expect(error?.message.contains("retry(2, delay:)") == true, "\(error?.message ?? "")")
            withExtendedLifetime(output) {}
        }
        let huge = RetryDelay.exponential(initial: .seconds(1), maximum: .seconds(Int64.max))
        #expect(huge.delay(afterAttempt: 40) == .seconds(1 << 39))
        #expect(huge.delay(afterAttempt: 5_000) == .seconds(Int64.max))
        #expect(RetryDelay.exponential(initial: .milliseconds(-100), jitter: 0.5).delay(afterAttempt: 1) == .zero)
        #expect(RetryDelay.exponential(initial: .seconds(1), multiplier: .nan).delay(afterAttempt: 3) == .seconds(60))
        #expect(RetryDelay.constant(.seconds(-1)).delay(afterAttempt: 1) == .zero)
        // A huge wait on the real clock is scheduled, not a trap, and cancelled with the retry.
        let attempts = Locked(0)
        let endless = Command<String>.retry(1, delay: .constant(.seconds(Int64.max))) {
            attempts.withLock { $0 += 1 }
            return Command<String> { result in result.fail(CommandError(code: .timedOut, command: "x", message: "x")) }
        }
        let cancelled = Checkpoint()
        endless.execute(on: .immediate) { if case .cancelled = $0 { cancelled.fulfill() } }
        endless.cancel()
        #expect(await cancelled.wait())
    }

    @Test func timeout_failsAtTheDeadline_andCancelsTheSource() {
        let m = Marbles()
        let source = m.input("--1--|")
        #expect(m.run(source.timeout(m.tick * 3, scheduler: m.scheduler)) == "--1#")
        #expect(source.isCancelled)
        let m2 = Marbles()
        #expect(m2.run(m2.input("1|").timeout(m2.tick * 3, scheduler: m2.scheduler)) == "1|")
        let m3 = Marbles()
        #expect(m3.run(m3.input("1|").timeout(.zero, scheduler: m3.scheduler)) == "#")
    }

    @Test func delay_shiftsEveryEvent_keepingOrder() {
        let m = Marbles()
        #expect(m.run(m.input("1-2|").delay(m.tick * 2, scheduler: m.scheduler)) == "--1-2|")
    }

    @Test func throttle_sendsAValueAfterQuiet_andFlushesOnCompletion() {
        let m = Marbles()
        #expect(m.run(m.input("ab---c|").throttle(m.tick * 2, scheduler: m.scheduler)) == "---b--(c|)")
    }

    @Test func interval_countsUntilTaken() {
        let m = Marbles()
        #expect(m.run(Command<Int>.interval(m.tick, scheduler: m.scheduler).take(3).map(String.init)) == "-01(2|)")
    }
}

/// Bad time arguments fail at once with `invalidArgument` (the misuse catalogue in
/// CommandCoreTests/MisuseTests.swift lists them).
@Suite struct TimeMisuseTests {
    /// The error `command` failed with, once it ended.
    private func failure<Output>(of command: Command<Output>) async -> CommandError? {
        let error = Locked<CommandError?>(nil)
        let ended = Checkpoint()
        command.execute(on: .immediate) { event in
            if case .failed(let thrown) = event { error.withLock { $0 = thrown as? CommandError } }
            if event.isTerminal { ended.fulfill() }
        }
        guard await ended.wait() else { return nil }
        return error.withLock { $0 }
    }

    @Test func retryWithANegativeCount_andANonPositiveTimeout_failWithInvalidArgument() async {
        let retry = Command<Int>.retry(-1) { Command<Int> { result in result.succeed(1) } }
        let retried = await failure(of: retry)
        #expect(retried?.code == .invalidArgument)
        #expect(retried?.message.contains("retry(-1)") == true)
        for interval in [Duration.zero, .seconds(-1)] {
            let slow = Command<Int> { result in result.succeed(1) }
            #expect(await failure(of: slow.timeout(interval))?.code == .invalidArgument)
        }
    }
}
