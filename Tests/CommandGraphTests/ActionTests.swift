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

/// Subjects (CommandCore) feeding a combinator: the integration; the subject's own rules are in
/// CommandCoreTests/CommandSubjectTests.swift.
@Suite struct SubjectGraphTests {
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
