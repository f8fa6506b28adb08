import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

private struct Boom: Error {}

/// `Command.just`, `.empty`, `.fail`, `.never`: real commands whose outcome is known when made.
@Suite struct ReadyValueTests {
    /// Executed by the engine, it runs in place: an `.immediate` observer has every event before
    /// `execute` returns (no queue hop).
    @Test func just_sendsItsValueAndCompletes_inPlace() async throws {
        let events = Locked<[String]>([])
        Command<Int>.just(5).execute(on: .immediate) { event in events.withLock { $0.append("\(event)") } }
        #expect(events.withLock { $0 } == ["value(5)", "completed"])
        #expect(try await Command<String>.just("a").value == "a")
    }

    @Test func empty_completesWithoutAValue_fail_failsWithTheError() async {
        let events = Locked<[String]>([])
        Command<Int>.empty.execute(on: .immediate) { event in events.withLock { $0.append("\(event)") } }
        #expect(events.withLock { $0 } == ["completed"])
        let state = await terminalState(of: Command<Int>.fail(Boom()), start: true)
        guard case .failed(let error) = state else {
            Issue.record("\(state)")
            return
        }
        #expect(error is Boom)
    }

    @Test func never_runs_andEndsOnlyWhenCancelled() async {
        let never = Command<Int>.never
        let states = Locked<[String]>([])
        never.execute(on: .immediate) { event in states.withLock { $0.append("\(event)") } }
        #expect(never.isExecuting)
        #expect(states.withLock { $0 }.isEmpty)
        never.cancel()
        #expect(states.withLock { $0 }.count == 1 && states.withLock { $0 }.first?.hasPrefix("cancelled") == true)
        #expect(never.isCancelled)
    }

    @Test func cancelledBeforeItRan_endsCancelled_withoutAValue() async {
        let just = Command<Int>.just(1)
        just.cancel()
        let events = Locked<[String]>([])
        just.execute(on: .immediate) { event in events.withLock { $0.append("\(event)") } }
        #expect(events.withLock { $0 }.count == 1 && events.withLock { $0 }.first?.hasPrefix("cancelled") == true)
    }

    @Test func inAQueueOfYours_andAsADependency() async {
        let queue = OperationQueue()
        let log = Locked<[String]>([])
        let first = Command<Int>.just(1)
        let second = Command<Int> { result in
            log.withLock { $0.append("second") }
            result.succeed(2)
            return nil
        }
        second.addDependency(first)
        queue.addOperation(second)
        queue.addOperation(first)
        #expect("\(await terminalState(of: second))" == "completed")
        #expect(first.isFinished && log.withLock { $0 } == ["second"])
        let plain = BlockOperation {}
        plain.addDependency(Command<Int>.empty)
        #expect(plain.dependencies.count == 1)
    }

    @Test func readyCommands_areNamed_forReports() {
        #expect(Command<Int>.just(1).displayName == "just")
        #expect(Command<Int>.empty.displayName == "empty")
        #expect(Command<Int>.fail(Boom()).displayName == "fail")
        #expect(Command<Int>.never.displayName == "never")
    }
}
