import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

private struct Boom: Error {}

/// Lifecycle observers (`CommandObserver`, `BlockObserver`, `TimeoutObserver`). Ported from
/// ProcedureKit's `BlockObserverTests` and `TimeoutObserverTests` where they apply: will/did execute
/// and finish, observers on a cancelled procedure, a timeout that cancels and one that does not fire.
/// Not ported: ProcedureKit's will/did *add operation* and will/did *cancel* callbacks, which this
/// library does not have (a cancel is seen as `willFinish` with a cancelled state).
@Suite struct ObserverTests {
    private func recorder(_ log: Locked<[String]>) -> BlockObserver {
        BlockObserver(
            willExecute: { _ in log.withLock { $0.append("willExecute") } },
            didExecute: { _ in log.withLock { $0.append("didExecute") } },
            willFinish: { _, state in log.withLock { $0.append("willFinish \(state)") } },
            didFinish: { _, state in log.withLock { $0.append("didFinish \(state)") } })
    }

    @Test func aCommandThatEndsLater_getsEveryStep_inOrder() async {
        let log = Locked<[String]>([])
        let command = Command<Int> { result in
            log.withLock { $0.append("run") }
            DispatchQueue.global().async { result.succeed(1) }
            return nil
        }
        command.add(observer: recorder(log))
        let recorded = Checkpoint()  // observers are called in the order added: this one comes last
        command.add(observer: BlockObserver(didFinish: { _, _ in recorded.fulfill() }))
        #expect("\(await terminalState(of: command, start: true))" == "completed")
        #expect(await recorded.wait())
        let late = Locked<String?>(nil)
        command.add(observer: BlockObserver(didFinish: { _, state in late.withLock { $0 = "\(state)" } }))
        #expect(late.withLock { $0 } == "completed", "an observer added after the end gets didFinish at once")
        #expect(
            log.withLock { $0 } == ["willExecute", "run", "didExecute", "willFinish completed", "didFinish completed"])
    }

    /// A command that ends inside `run`: `willFinish` and `didFinish` come before `didExecute` (its run
    /// has not returned yet), as documented.
    @Test func aCommandThatEndsInsideRun_finishesBeforeDidExecute() async {
        let log = Locked<[String]>([])
        let ended = Checkpoint()
        let command = Command<Int> { result in
            result.fail(Boom())
            return nil
        }
        command.add(observer: recorder(log))
        command.add(observer: BlockObserver(didExecute: { _ in ended.fulfill() }))
        command.start()
        #expect(await ended.wait())
        let steps = log.withLock { $0 }
        #expect(steps.first == "willExecute")
        #expect(steps.dropFirst().first?.hasPrefix("willFinish failed") == true)
        #expect(steps.count == 4 && steps.last == "didExecute")
    }

    @Test func cancelledBeforeItRan_getsOnlyTheFinishSteps() async {
        let log = Locked<[String]>([])
        let command = Command<Int> { result in
            log.withLock { $0.append("run") }
            result.succeed(1)
            return nil
        }
        command.add(observer: recorder(log))
        command.cancel()
        _ = await terminalState(of: command, start: true)
        #expect(log.withLock { $0 } == ["willFinish cancelled(cancelled)", "didFinish cancelled(cancelled)"])
    }

    /// `willFinish` runs before any dependent starts, in the engine's graph and in a user's queue.
    @Test func willFinish_comesBeforeTheDependentStarts() async {
        for userQueue in [false, true] {
            let log = Locked<[String]>([])
            let first = Command<Int> { result in
                DispatchQueue.global().async { result.succeed(1) }
                return nil
            }
            first.add(
                observer: BlockObserver(willFinish: { _, _ in log.withLock { $0.append("willFinish") } }))
            let second = Command<Int> { result in
                log.withLock { $0.append("dependent runs") }
                result.succeed(2)
                return nil
            }
            second.addDependency(first)
            let ended = Checkpoint()
            second.observeState(on: .immediate) { state in if state.isTerminal { ended.fulfill() } }
            if userQueue {
                let queue = OperationQueue()
                queue.addOperation(second)
                queue.addOperation(first)
            } else {
                second.execute(on: .immediate) { _ in }
            }
            #expect(await ended.wait())
            #expect(log.withLock { $0 } == ["willFinish", "dependent runs"], "user queue: \(userQueue)")
        }
    }

    @Test func timeoutObserver_cancelsACommandThatRunsTooLong_withTimedOut() async {
        let kept = Locked<CommandResult<Int>?>(nil)
        let command = Command<Int> { result in
            kept.withLock { $0 = result }  // never ends by itself
            return nil
        }
        command.name = "slow"
        command.add(observer: TimeoutObserver(after: .milliseconds(20)))
        let state = await terminalState(of: command, start: true)
        guard case .cancelled(let error) = state else {
            Issue.record("expected cancelled, got \(state)")
            return
        }
        #expect(error.code == .timedOut)
        #expect(error.command == "slow")
        #expect(command.isCancelled)
    }

    /// The timer firing after the command ended changes nothing (its cancel finds the command ended).
    /// Driven directly, without a race against a clock.
    @Test func timeoutObserver_doesNothingToACommandThatEndedFirst() async {
        let command = Command<Int> { result in
            result.succeed(1)
            return nil
        }
        let clock = VirtualScheduler()
        command.add(observer: TimeoutObserver(after: .seconds(3_600), scheduler: clock))
        #expect("\(await terminalState(of: command, start: true))" == "completed")
        #expect(clock.pendingCount == 1)
        clock.advance(by: .seconds(3_600))  // the timer fires after the command ended
        #expect(clock.pendingCount == 0)
        #expect("\(command.state)" == "completed")
        #expect(!command.isCancelled)
    }

    /// The timeout is a timer of a `CommandScheduler`: a virtual clock drives it, to the nanosecond.
    @Test func timeoutObserver_onAVirtualScheduler_cancelsWhenTheClockPassesTheInterval() async {
        let kept = Locked<CommandResult<Int>?>(nil)
        let running = Checkpoint()
        let command = Command<Int> { result in
            kept.withLock { $0 = result }  // never ends by itself
            running.fulfill()
            return nil
        }
        command.name = "upload"
        let clock = VirtualScheduler()
        command.add(observer: TimeoutObserver(after: .seconds(10), scheduler: clock))
        let ended = Task { await terminalState(of: command) }
        command.execute { _ in }
        #expect(await running.wait())
        clock.advance(by: .seconds(10) - .nanoseconds(1))
        #expect("\(command.state)" == "executing")
        clock.advance(by: .nanoseconds(1))
        guard case .cancelled(let error) = await ended.value else {
            Issue.record("expected cancelled, got \(command.state)")
            return
        }
        #expect(error.code == .timedOut)
        #expect(error.message.contains("'upload'") && error.message.contains("10"))
    }

    /// An interval beyond what a timer holds (about 292 years in nanoseconds) trapped on an arithmetic
    /// overflow when the command began its run. It waits "forever" instead: the command runs and ends.
    @Test func timeoutObserver_aHugeInterval_neverTraps_andNeverFires() async {
        for interval: Duration in [.seconds(10_000_000_000), .seconds(Int64.max), .seconds(1e12)] {
            let command = Command<Int> { result in
                result.succeed(7)
                return nil
            }
            command.add(observer: TimeoutObserver(after: interval))
            let ended = Task { await terminalState(of: command) }
            command.execute { _ in }
            #expect("\(await ended.value)" == "completed", "interval \(interval)")
        }
    }

    /// The one conversion every timer uses saturates instead of trapping, and waits 0 for a negative.
    @Test func durationConversion_saturates_andClampsNegativeWaits() {
        #expect(Duration.seconds(2).saturatingNanoseconds == 2_000_000_000)
        #expect(Duration.milliseconds(1.5).saturatingNanoseconds == 1_500_000)
        #expect(Duration.seconds(10_000_000_000).saturatingNanoseconds == .max)
        #expect(Duration.seconds(Int64.max).saturatingNanoseconds == .max)
        #expect(Duration.seconds(-10_000_000_000).saturatingNanoseconds == .min)
        #expect(Duration.seconds(-1).dispatchInterval == .nanoseconds(0))
        #expect(Duration.seconds(10_000_000_000).dispatchInterval == .nanoseconds(Int.max))
        #expect(Duration(clampingSeconds: 1.25) == .milliseconds(1_250))
        #expect(Duration(clampingSeconds: -3) == .zero)
        #expect(Duration(clampingSeconds: .nan) == .zero)
        #expect(Duration(clampingSeconds: 1e30) == Duration(secondsComponent: .max, attosecondsComponent: 0))
        #expect(Duration.milliseconds(250).inSeconds == 0.25)
    }
}
