import CommandTestSupport
import Testing

@testable import CommandGraph

/// Marble diagrams on a virtual clock (one character per tick; see `Marbles` in `Support/`), one
/// per rule the operator's documentation states.
@Suite struct FlatMapMarbleTests {
    @Test func flatMap_startsAnInnerPerValue_andCompletesWhenAllDid() {
        let m = Marbles()
        let output = m.input("ab|").flatMap { value in m.input(value.uppercased() + "|") }
        #expect(m.run(output) == "AB|")
    }

    @Test func flatMap_innerFailure_failsEverything() {
        let m = Marbles()
        let source = m.input("a--b|")
        let output = source.flatMap { _ in m.input("x-#") }
        #expect(m.run(output) == "x-#")
        #expect(source.isCancelled)
    }

    @Test func flatMap_maxConcurrent_queuesValuesWithoutDropping() {
        let m = Marbles()
        let output = m.input("abc|").flatMap(maxConcurrent: 1) { value in m.input(value + "-|") }
        #expect(m.run(output) == "a-b-c-|")
    }

    @Test func flatMap_nilMeansNoInner() {
        let m = Marbles()
        let output = m.input("abc|").flatMap { value in value == "b" ? nil : m.input(value + "|") }
        #expect(m.run(output) == "a-c|")
    }

    @Test func flatMapLatest_cancelsThePreviousInner() {
        let m = Marbles()
        let output = m.input("a-b|").flatMapLatest { value in m.input("-" + value + value.uppercased() + "|") }
        #expect(m.run(output) == "-a-bB|")
    }

    @Test func bind_chainsByTheLastValue_andRecoversFromErrors() {
        let m = Marbles()
        let chain = m.input("1|").bind { index, _, value, error in
            guard index < 2 else { return nil }
            if error != nil { return m.input("r|") }
            return index == 0 ? m.input("2#") : nil
        }
        #expect(m.run(chain) == "12r|")
        let m2 = Marbles()
        let unrecovered = m2.input("1#").bind { _, _, _, _ in nil }
        #expect(m2.run(unrecovered) == "1#")
    }

    @Test func catch_recoversWithTheReturnedCommand() {
        let m = Marbles()
        #expect(m.run(m.input("1#").catch { _ in m.input("x|") }) == "1x|")
        let m2 = Marbles()
        #expect(m2.run(m2.input("1#").catch { _ in m2.input("#") }) == "1#")
    }
}

/// The flatmap state machine as a plain value: no threads, no commands.
@Suite struct FlatMapStateMachineTests {
    @Test func flatMap_limitsConcurrency_andQueuesInOrder() {
        var machine = FlatMapStateMachine(maxConcurrent: 1)
        guard case .start = machine.value() else { Issue.record("first"); return }
        guard case .wait = machine.value() else { Issue.record("second started early"); return }
        guard case .wait = machine.value() else { Issue.record("third started early"); return }
        guard case .none = machine.sourceCompleted() else { Issue.record("completed early"); return }
        guard case .startWaiting = machine.innerCompleted() else { Issue.record("queued value 2"); return }
        guard case .startWaiting = machine.innerCompleted() else { Issue.record("queued value 3"); return }
        guard case .complete = machine.innerCompleted() else { Issue.record("not completed"); return }
        guard case .none = machine.value() else { Issue.record("a value after completion started"); return }
    }

    @Test func flatMap_firstFailureWins_andNothingStartsAfterIt() {
        struct Boom: Error {}
        var machine = FlatMapStateMachine(maxConcurrent: 2)
        guard case .start = machine.value() else { Issue.record("first"); return }
        guard case .fail = machine.failed(Boom()) else { Issue.record("not failed"); return }
        guard case .none = machine.cancelled() else { Issue.record("a second terminal"); return }
        guard case .none = machine.value() else { Issue.record("started after the failure"); return }
        guard case .none = machine.innerCompleted() else { Issue.record("acted after the failure"); return }
    }
}

/// A running `flatMap` holds only the inner commands still running.
@Suite struct FlatMapMemoryTests {
    private final class WeakInner: @unchecked Sendable {
        // Appended to by the transform, on the sending thread (this test's), read after.
        var inners: [() -> Command<Int>?] = []
    }

    @Test func endedInners_areLetGo_whileTheNodeRuns() async {
        let subject = CommandSubject<Int>(replay: .none)
        let weak = WeakInner()
        let output = subject.flatMap { value -> Command<Int> in
            let inner = CommandSubject<Int>(replay: .latest)
            inner.send(value * 10)
            inner.complete()
            weak.inners.append { [weak inner] in inner }
            return inner
        }
        let values = Locked<[Int]>([])
        let token = output.execute(on: .immediate) { event in
            if case .value(let value) = event { values.withLock { $0.append(value) } }
        }
        for value in 1...100 { subject.send(value) }
        #expect(values.withLock { $0 } == (1...100).map { $0 * 10 })
        #expect(!output.state.isTerminal, "the source has not completed")
        #expect(weak.inners.allSatisfy { $0() == nil }, "every inner ended and was let go of")
        // One still running is held.
        let running = CommandSubject<Int>(replay: .none)
        let second = CommandSubject<Int>(replay: .none)
        let held = second.flatMap { _ in running }
        let heldToken = held.execute(on: .immediate) { _ in }
        second.send(1)
        running.send(7)
        #expect(held.runTimeInputs.contains { $0 === running })
        running.complete()
        _ = (token, heldToken)
        output.cancel()
        held.cancel()
    }
}

/// An inner command that had already finished when the transform returned it replays at once (its
/// kept values, then its terminal event), exactly as an observer attaching to it would get them.
@Suite struct FlatMapFinishedInnerTests {
    private struct Boom: Error {}

    /// A command that sends `values` and then ends with `ending`, run to its end.
    private func finished(_ values: [Int], failing: Bool = false) async -> Command<Int> {
        let command = Command<Int> { result in
            for value in values { result.send(value) }
            if failing { result.fail(Boom()) } else { result.complete() }
            return nil
        }
        let state = await terminalState(of: command, start: true)
        #expect(state.isTerminal)
        #expect(command.isFinished)
        return command
    }

    private func events(of output: Command<Int>, sending values: [Int], to subject: CommandSubject<Int>) async
        -> (values: [Int], terminal: CommandEvent<Int>?)
    {
        let seen = Locked<(values: [Int], terminal: CommandEvent<Int>?)>(([], nil))
        let ended = Checkpoint()
        let token = output.execute(on: .immediate) { event in
            seen.withLock { seen in
                if case .value(let value) = event { seen.values.append(value) } else { seen.terminal = event }
            }
            if event.isTerminal { ended.fulfill() }
        }
        for value in values { subject.send(value) }
        subject.complete()
        #expect(await ended.wait())
        _ = token
        return seen.withLock { $0 }
    }

    @Test func finishedInners_replayEveryKeptValue_inOrder_andTheNodeCompletes() async {
        let first = await finished([1, 2, 3])
        let second = await finished([4])
        let subject = CommandSubject<Int>(replay: .none)
        let output = subject.flatMap { $0 == 0 ? first : second }
        let (values, terminal) = await events(of: output, sending: [0, 1], to: subject)
        #expect(values == [1, 2, 3, 4])
        #expect(
            terminal?.isTerminal == true && terminal.map { if case .completed = $0 { true } else { false } } == true)
    }

    @Test func aFinishedFailedInner_failsTheNodeWithItsError() async {
        let failed = await finished([7], failing: true)
        let subject = CommandSubject<Int>(replay: .none)
        let output = subject.flatMap { _ in failed }
        let (values, terminal) = await events(of: output, sending: [0, 1], to: subject)
        #expect(values == [7], "the value before the failure, once: the node ended at the failure")
        guard case .failed(let error)? = terminal else {
            Issue.record("not failed: \(String(describing: terminal))"); return
        }
        #expect(error is Boom)
    }

    @Test func anInnerCancelledBeforeItStarted_isStillFinishedByTheSubscription() async {
        let cancelled = Command<Int> { _ in nil }
        cancelled.cancel()
        #expect(!cancelled.isFinished, "cancelled, not started: Foundation's rule")
        let subject = CommandSubject<Int>(replay: .none)
        let output = subject.flatMap { _ in cancelled }
        let (values, terminal) = await events(of: output, sending: [0], to: subject)
        #expect(values.isEmpty)
        guard case .cancelled(let error)? = terminal else { Issue.record("not cancelled"); return }
        #expect(error.code == .dependencyCancelled)
        #expect(cancelled.isFinished, "subscribing executed it, which finished it")
    }
}

/// `flatMap`, `catch` and `bind` with the ready-value commands, on real threads.
@Suite struct ReadyValueCombinatorTests {
    @Test func flatMap_ofJust_emptyAndFail() async throws {
        let subject = CommandSubject<Int>()
        let values = Locked<[Int]>([])
        let done = Checkpoint()
        subject.flatMap { $0 % 3 == 0 ? .empty : .just($0 * 10) }
            .execute(on: .immediate) { event in
                if let value = event.value { values.withLock { $0.append(value) } }
                if event.isTerminal { done.fulfill() }
            }
        for value in 1...6 { subject.send(value) }
        subject.complete()
        #expect(await done.wait())
        #expect(values.withLock { $0 } == [10, 20, 40, 50])

        struct Boom: Error {}
        let failed = await terminalState(
            of: Command<Int>.just(1).flatMap { _ in Command<Int>.fail(Boom()) }, start: true)
        if case .failed(let error) = failed { #expect(error is Boom) } else { Issue.record("\(failed)") }
        let recovered = try await Command<Int>.fail(Boom()).catch { _ in .just(7) }.value
        #expect(recovered == 7)
    }
}
