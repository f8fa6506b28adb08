import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

private struct Unauthorized: Error {}
private struct RefreshFailed: Error {}

/// `retry(_:delay:scheduler:shouldRetry:_:)`: the decision sees the error, the attempt and the errors
/// so far; `make` sees the attempt; `.retryWithDelay`, `.doNotRetry`, `.recover` (then the next
/// attempt, or the recovery's error), the count bounding the attempts, and cancel reaching the
/// recovery. Ported from ProcedureKit's `RetryProcedureTests` where they apply (its iterator of
/// payloads is `make` here; its `RetryFailureInfo` is `RetryFailure`); not ported: the cases about
/// its procedure-level observers and `willAttemptRetry` hooks, which this library does not have.
@Suite struct RetryDecisionTests {
    @Test func shouldRetry_seesTheErrorAttemptAndErrorsSoFar_andMakeSeesTheAttempt() {
        let m = Marbles()
        let scripts = Locked(["1#", "2#", "3|"])
        let seen = Locked<[String]>([])
        let output = Command<String>.retry(
            3, scheduler: m.scheduler,
            shouldRetry: { failure in
                let diagram = (failure.error as? MarbleError)?.diagram ?? "?"
                seen.withLock { $0.append("failed \(failure.attempt) \(diagram) \(failure.errors.count)") }
                return .retry
            }
        ) { attempt in
            seen.withLock { $0.append("make \(attempt.number) \(attempt.lastError != nil)") }
            return m.input(scripts.withLock { $0.removeFirst() })
        }
        #expect(m.run(output) == "123|")
        #expect(
            seen.withLock { $0 } == [
                "make 1 false", "failed 1 1# 1", "make 2 true", "failed 2 2# 2", "make 3 true",
            ])
    }

    @Test func doNotRetry_failsAtOnce_withTheAttemptsError() {
        let m = Marbles()
        let made = Locked(0)
        let output = Command<String>.retry(3, scheduler: m.scheduler, shouldRetry: { _ in .doNotRetry }) { _ in
            made.withLock { $0 += 1 }
            return m.input("1#")
        }
        #expect(m.run(output) == "1#")
        #expect(made.withLock { $0 } == 1)
    }

    @Test func retryWithDelay_waitsThatLongInstead() {
        let m = Marbles()
        let output = Command<String>.retry(
            1, delay: .constant(m.tick * 9), scheduler: m.scheduler, shouldRetry: { _ in .retryWithDelay(m.tick * 3) }
        ) { _ in m.input("a#") }
        #expect(m.run(output) == "a---a#")
        let m2 = Marbles()
        let negative = Command<String>.retry(
            1, scheduler: m2.scheduler, shouldRetry: { _ in .retryWithDelay(.seconds(-5)) }
        ) { _ in m2.input("a#") }
        #expect(m2.run(negative) == "aa#")
    }

    @Test func theCount_boundsTheAttempts_andTheLastFailureIsNotAsked() {
        let m = Marbles()
        let asked = Locked(0)
        let output = Command<String>.retry(
            2, scheduler: m.scheduler,
            shouldRetry: { _ in
                asked.withLock { $0 += 1 }
                return .retry
            }
        ) { _ in m.input("x#") }
        #expect(m.run(output) == "xxx#")
        #expect(asked.withLock { $0 } == 2)
    }

    /// "Refresh the OAuth token, then retry": the recovery runs between the attempts.
    @Test func recover_runsTheCommand_thenTheNextAttempt() async throws {
        let log = Locked<[String]>([])
        let token = Locked("expired")
        let fetch = Command<String>.retry(
            3,
            shouldRetry: { failure in
                failure.error is Unauthorized
                    ? .recover(
                        Command<Void> { result in
                            log.withLock { $0.append("refresh") }
                            token.withLock { $0 = "fresh" }
                            result.succeed()
                            return nil
                        }) : .doNotRetry
            }
        ) { attempt in
            Command<String> { result in
                let current = token.withLock { $0 }
                log.withLock { $0.append("fetch \(attempt.number) with \(current)") }
                if current == "expired" { result.fail(Unauthorized()) } else { result.succeed("data") }
                return nil
            }
        }
        let value = try await fetch.value
        #expect(value == "data")
        #expect(log.withLock { $0 } == ["fetch 1 with expired", "refresh", "fetch 2 with fresh"])
    }

    @Test func recoveryFailing_failsTheRetry_withItsError_andNoFurtherAttempt() async {
        let made = Locked(0)
        let fetch = Command<Int>.retry(
            3,
            shouldRetry: { _ in
                .recover(
                    Command<Void> { result in
                        result.fail(RefreshFailed())
                        return nil
                    })
            }
        ) { _ in
            made.withLock { $0 += 1 }
            return Command<Int> { result in
                result.fail(Unauthorized())
                return nil
            }
        }
        await #expect(throws: RefreshFailed.self) { try await fetch.value }
        #expect(made.withLock { $0 } == 1)
    }

    @Test func cancel_whileRecovering_cancelsTheRecovery() async {
        let recovering = Checkpoint()
        let recoveryCancelled = Checkpoint()
        let kept = Locked<CommandResult<Void>?>(nil)
        let fetch = Command<Int>.retry(
            3,
            shouldRetry: { _ in
                .recover(
                    Command<Void> { result in
                        kept.withLock { $0 = result }  // the recovery runs until cancelled
                        recovering.fulfill()
                        return BlockCancelable { recoveryCancelled.fulfill() }
                    })
            }
        ) { _ in
            Command<Int> { result in
                result.fail(Unauthorized())
                return nil
            }
        }
        let ended = Checkpoint()
        let terminal = Locked<String?>(nil)
        fetch.execute(on: .immediate) { event in
            if event.isTerminal {
                terminal.withLock { $0 = "\(event)" }
                ended.fulfill()
            }
        }
        #expect(await recovering.wait())
        fetch.cancel()
        #expect(await recoveryCancelled.wait())
        #expect(await ended.wait())
        #expect(terminal.withLock { $0 }?.hasPrefix("cancelled") == true, "\(terminal.withLock { $0 } ?? "nil")")
    }
}
