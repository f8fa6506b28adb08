import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

private struct Boom: Error {}

/// Runs that wait until the test releases them: they hold their result sinks. Tests wait for runs
/// to start through expectations, never by polling.
private final class Gate: Sendable {
    private struct State {
        var results: [Int: CommandResult<Int>] = [:]
        var inputWaiters: [Int: Checkpoint] = [:]
        var countWaiters: [(count: Int, expectation: Checkpoint)] = []
    }

    private let state = Locked(State())

    var startedCount: Int { state.withLock { $0.results.count } }

    func command(_ input: Int) -> Command<Int> {
        Command<Int> { [self] result in
            let ready = state.withLock { state -> [Checkpoint] in
                state.results[input] = result
                var ready = state.inputWaiters.removeValue(forKey: input).map { [$0] } ?? []
                ready += state.countWaiters.filter { $0.count <= state.results.count }.map(\.expectation)
                state.countWaiters.removeAll { $0.count <= state.results.count }
                return ready
            }
            for expectation in ready { expectation.fulfill() }
            return nil
        }
    }

    func waitForStart(of input: Int) async -> Bool {
        let expectation = Checkpoint()
        let started = state.withLock { state -> Bool in
            if state.results[input] != nil { return true }
            state.inputWaiters[input] = expectation
            return false
        }
        return started ? true : await expectation.wait()
    }

    func waitForStarts(_ count: Int) async -> Bool {
        let expectation = Checkpoint()
        let started = state.withLock { state -> Bool in
            if state.results.count >= count { return true }
            state.countWaiters.append((count, expectation))
            return false
        }
        return started ? true : await expectation.wait()
    }

    func completeAll() {
        for result in state.withLock({ Array($0.results.values) }) { result.succeed(0) }
    }
}

private func becameExecuting<Output>(_ command: Command<Output>) async {
    await withCheckedContinuation { continuation in
        let once = Locked(false)
        command.observeState(on: .immediate) { state in
            guard
                once.withLock({ done in
                    defer { done = true }; return !done
                })
            else { return }
            continuation.resume()
        }
    }
}

@Suite struct AsyncBridgeTests {
    @Test func value_returnsTheLastValue_andRethrowsFailures() async throws {
        let command = Command<Int> { result in
            result.send(1)
            result.send(2)
            result.complete()
            return nil
        }
        #expect(try await command.value == 2)
        let failing = Command<Int> { result in
            result.fail(Boom())
            return nil
        }
        await #expect(throws: Boom.self) { try await failing.value }
        let empty = Command<Int> { result in
            result.complete()
            return nil
        }
        do {
            _ = try await empty.value
            Issue.record("no error")
        } catch let error as CommandError {
            #expect(error.code == .noValue)
        }
    }

    @Test func cancellingTheTask_cancelsTheCommand() async {
        let never = Command<Int> { result in BlockCancelable { _ = result } }
        let task = Task { try await never.value }
        await becameExecuting(never)
        task.cancel()
        let outcome = await task.result
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(never.isCancelled)
    }

    @Test func cancellingTheCommand_endsTheAwait() async {
        let never = Command<Int> { result in BlockCancelable { _ = result } }
        let task = Task { try await never.value }
        await becameExecuting(never)
        never.cancel()
        let outcome = await task.result
        #expect(throws: CancellationError.self) { try outcome.get() }
    }

    @Test func values_streamsEveryValue_andBreakingCancelsTheCommand() async throws {
        let finite = Command<Int> { result in
            for value in 0..<100 { result.send(value) }
            result.complete()
            return nil
        }
        var received: [Int] = []
        for try await value in finite.values { received.append(value) }
        #expect(received == Array(0..<100))

        let infinite = Command<Int> { result in
            result.send(1)
            result.send(2)
            return BlockCancelable { _ = result }
        }
        for try await value in infinite.values where value == 2 { break }
        guard case .cancelled = await terminalState(of: infinite) else { Issue.record("not cancelled"); return }
    }

    /// The original README's `excuteBlock` shape: work that reports later from another queue, with
    /// `return nil` (without it the closure no longer compiles as another initialiser that completes at
    /// once): the late value arrives.
    @Test func blockCommand_reportingLater_deliversTheLateValue() async {
        let command = Command<Int> { result in
            DispatchQueue.global().asyncAfter(deadline: .now()) { result.succeed(1) }
            return nil
        }
        let values = Locked<[Int]>([])
        let ended = Checkpoint()
        command.execute(on: .immediate) { event in
            if let value = event.value { values.withLock { $0.append(value) } }
            if event.isTerminal { ended.fulfill() }
        }
        #expect(await ended.wait())
        #expect(values.withLock { $0 } == [1])
        #expect(command.state.isTerminal)
    }

    /// The closure as a new user writes it: no `return nil`. It picks the form that waits for the
    /// terminal event (before, it picked `init(async:)`, completed at once and dropped the value).
    @Test func blockCommand_withoutReturn_waitsForTheLateValue() async {
        let command = Command<Int> { result in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { result.succeed(1) }
        }
        let events = Locked<[String]>([])
        let ended = Checkpoint()
        command.execute(on: .immediate) { event in
            events.withLock { $0.append("\(event)") }
            if event.isTerminal { ended.fulfill() }
        }
        #expect(await ended.wait())
        #expect(events.withLock { $0 } == ["value(1)", "completed"])
    }

    @Test func asyncClosureCommands_runInATaskThatCancelCancels() async throws {
        let one = Command<String> { () async throws -> String in "fetched" }
        #expect(try await one.value == "fetched")

        let sawCancellation = Checkpoint()
        let streaming = Command<Int>(async: { result in
            result.send(1)
            // Waits for an element that never comes; the task's cancellation ends the wait.
            let (never, continuation) = AsyncStream<Int>.makeStream()
            for await _ in never {}
            withExtendedLifetime(continuation) {}
            if Task.isCancelled { sawCancellation.fulfill() }
        })
        let first = Checkpoint()
        streaming.execute(on: .immediate) { event in if case .value = event { first.fulfill() } }
        #expect(await first.wait())
        streaming.cancel()
        #expect(await sawCancellation.wait())
        #expect(streaming.isCancelled)
    }
}

@Suite struct SubjectTests {
    @Test func subjects_feedACombineLatestGraph() async {
        let username = CommandSubject<String>()
        let password = CommandSubject<String>()
        let valid = combineLatest(username, password) { !$0.isEmpty && $1.count >= 8 }
        let seen = Locked<[Bool]>([])
        let third = Checkpoint()
        // Inline, so the graph has subscribed to the subjects when `execute` returns (a real run
        // subscribes on its own queue, and sends before that would meet the subjects' replay).
        InlineExecution.$isOn.withValue(true) {
            valid.execute(on: .immediate) { event in
                if case .value(let value) = event {
                    let count = seen.withLock {
                        $0.append(value); return $0.count
                    }
                    if count == 3 { third.fulfill() }
                }
            }
        }
        username.send("ada")
        password.send("short")
        password.send("long enough")
        username.send("")
        #expect(await third.wait())
        username.complete()
        password.complete()
        guard case .completed = await terminalState(of: valid) else { Issue.record("not completed"); return }
        #expect(seen.withLock { $0 } == [false, true, false])
    }

    @Test func subject_keepsEarlySends_andReplaysPerPolicy() async {
        let all = CommandSubject<Int>(replay: .all)
        let latest = CommandSubject<Int>(replay: .latest)
        for value in 1...3 {
            all.send(value)
            latest.send(value)
        }
        all.complete()
        latest.complete()
        let allValues = Locked<[Int]>([])
        let latestValues = Locked<[Int]>([])
        let done = Checkpoint(count: 2)
        all.execute(on: .immediate) { event in
            if case .value(let value) = event { allValues.withLock { $0.append(value) } } else { done.fulfill() }
        }
        latest.execute(on: .immediate) { event in
            if case .value(let value) = event { latestValues.withLock { $0.append(value) } } else { done.fulfill() }
        }
        #expect(await done.wait())
        #expect(allValues.withLock { $0 } == [1, 2, 3])
        #expect(latestValues.withLock { $0 } == [3])
    }
}

@Suite struct ActionTests {
    private static let executions = 1000

    /// 1,000 executes from many threads at once, against work that does not finish until released.
    private func hammer(_ action: CommandAction<Int, Int>) -> [Command<Int>] {
        let commands = Locked<[Int: Command<Int>]>([:])
        DispatchQueue.concurrentPerform(iterations: Self.executions) { index in
            let command = action.execute(index)
            commands.withLock { $0[index] = command }
        }
        return commands.withLock { table in (0..<Self.executions).map { table[$0]! } }
    }

    private func outcomes(_ commands: [Command<Int>]) async -> (completed: Int, rejected: Int, cancelled: Int) {
        var counts = (completed: 0, rejected: 0, cancelled: 0)
        for command in commands {
            switch await terminalState(of: command) {
            case .completed: counts.completed += 1
            case .failed(let error as CommandError) where error.code == .notEnabled: counts.rejected += 1
            case .cancelled: counts.cancelled += 1
            default: Issue.record("unexpected \(command.state)")
            }
        }
        return counts
    }

    @Test func reject_runsOne_andRefusesTheRest() async {
        let gate = Gate()
        let action = CommandAction<Int, Int>(policy: .reject) { gate.command($0) }
        let commands = hammer(action)
        #expect(action.isExecuting && !action.isEnabled)
        #expect(await gate.waitForStarts(1))
        gate.completeAll()
        let counts = await outcomes(commands)
        #expect(counts.completed == 1 && counts.rejected == 999 && counts.cancelled == 0)
        #expect(gate.startedCount == 1)
    }

    @Test func concurrent_runsUpToMax() async {
        let gate = Gate()
        let action = CommandAction<Int, Int>(policy: .concurrent(max: 4)) { gate.command($0) }
        let commands = hammer(action)
        #expect(await gate.waitForStarts(4))
        gate.completeAll()
        let counts = await outcomes(commands)
        #expect(counts.completed == 4 && counts.rejected == 996 && counts.cancelled == 0)
    }

    @Test func cancelPrevious_letsTheLatestWin() async {
        let gate = Gate()
        let action = CommandAction<Int, Int>(policy: .cancelPrevious) { gate.command($0) }
        let commands = hammer(action)
        let survivors = commands.indices.filter { !commands[$0].isCancelled }
        #expect(survivors.count == 1)
        if let survivor = survivors.first { #expect(await gate.waitForStart(of: survivor)) }
        gate.completeAll()
        let counts = await outcomes(commands)
        #expect(counts.completed == 1 && counts.rejected == 0 && counts.cancelled == 999)
        #expect(!action.isExecuting)
    }

    @Test func enqueue_runsEveryExecution_oneAtATime() async {
        let running = Locked((now: 0, most: 0, order: [Int]()))
        let action = CommandAction<Int, Int>(policy: .enqueue) { input in
            Command<Int> { result in
                running.withLock { state in
                    state.now += 1
                    state.most = max(state.most, state.now)
                    state.order.append(input)
                }
                DispatchQueue.global().async {
                    running.withLock { $0.now -= 1 }
                    result.succeed(input)
                }
                return nil
            }
        }
        let commands = hammer(action)
        let counts = await outcomes(commands)
        #expect(counts.completed == 1000 && counts.rejected == 0 && counts.cancelled == 0)
        let state = running.withLock { $0 }
        #expect(state.most == 1)
        #expect(state.order.count == 1000 && Set(state.order).count == 1000)
    }

    @Test func enabledIf_refusesWhenFalse_andValuesAndErrorsAreObservable() async {
        let allowed = Locked(false)
        let action = CommandAction<Int, Int>(policy: .concurrent(max: 10), enabledIf: { allowed.withLock { $0 } }) {
            input in
            Command<Int> { result in
                if input < 0 { result.fail(Boom()) } else { result.succeed(input * 2) }
                return nil
            }
        }
        guard case .failed(let refusal as CommandError) = await terminalState(of: action.execute(1)) else {
            Issue.record("accepted"); return
        }
        #expect(refusal.code == .notEnabled)
        allowed.withLock { $0 = true }
        let values = Locked<[Int]>([])
        let errors = Locked(0)
        let observed = Checkpoint(count: 2)
        action.values.execute(on: .immediate) { event in
            if case .value(let value) = event {
                values.withLock { $0.append(value) }
                observed.fulfill()
            }
        }
        action.errors.execute(on: .immediate) { event in
            if case .value = event {
                errors.withLock { $0 += 1 }
                observed.fulfill()
            }
        }
        _ = await terminalState(of: action.execute(21))
        _ = await terminalState(of: action.execute(-1))
        #expect(await observed.wait())
        #expect(values.withLock { $0 } == [42])
        #expect(errors.withLock { $0 } == 1)
    }
}
