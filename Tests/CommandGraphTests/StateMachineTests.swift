import Testing

@testable import CommandGraph

/// The combinators' state machines as plain values: no threads, no commands.
@Suite struct CombinatorStateMachineTests {
    private struct Boom: Error {}

    @Test func combineLatest_waitsForEveryInput_thenEmitsOnEachValue() {
        var machine = CombineLatestStateMachine<Int>(inputs: 2)
        guard case .none = machine.start() else { Issue.record("start"); return }
        guard case .none = machine.value(1, at: 0) else { Issue.record("emitted early"); return }
        guard case .emit(let first) = machine.value(10, at: 1), first == [1, 10] else { Issue.record("first"); return }
        guard case .none = machine.completed(at: 1) else { Issue.record("completed early"); return }
        guard case .emit(let second) = machine.value(2, at: 0), second == [2, 10] else {
            Issue.record("second"); return
        }
        guard case .complete = machine.completed(at: 0) else { Issue.record("not completed"); return }
        guard case .none = machine.value(3, at: 0) else { Issue.record("value after the end"); return }
    }

    @Test func combineLatest_failureAndCancellation_endIt() {
        var failing = CombineLatestStateMachine<Int>(inputs: 2)
        guard case .fail = failing.failed(Boom()) else { Issue.record("fail"); return }
        guard case .none = failing.failed(Boom()) else { Issue.record("second terminal"); return }
        var cancelled = CombineLatestStateMachine<Int>(inputs: 3)
        guard case .cancelled(index: 2) = cancelled.cancelled(at: 2) else { Issue.record("cancel"); return }
        var empty = CombineLatestStateMachine<Int>(inputs: 0)
        guard case .complete = empty.start() else { Issue.record("empty"); return }
    }

    @Test func zip_pairsFIFO_andCompletesWhenADoneInputIsDrained() {
        var machine = ZipStateMachine<Int>(inputs: 2)
        _ = machine.value(1, at: 0)
        _ = machine.value(2, at: 0)
        guard case .none = machine.completed(at: 0) else { Issue.record("completed with values buffered"); return }
        guard case .emit(let pairs, let complete) = machine.value(10, at: 1), pairs == [[1, 10]], !complete else {
            Issue.record("first pair"); return
        }
        guard case .emit(let last, let done) = machine.value(20, at: 1), last == [[2, 20]], done else {
            Issue.record("last pair should complete"); return
        }
        guard case .none = machine.value(30, at: 1) else { Issue.record("value after the end"); return }
    }

    @Test func merge_countsCompletions() {
        var machine = MergeStateMachine(inputs: 2)
        #expect(machine.value() == .pass)
        #expect(machine.completed() == .none)
        #expect(machine.completed() == .complete)
        #expect(machine.value() == .none)
        var empty = MergeStateMachine(inputs: 0)
        #expect(empty.start() == .complete)
    }

    @Test func flatMap_limitsConcurrency_andQueuesInOrder() {
        var machine = FlatMapStateMachine<Int>(maxConcurrent: 1)
        guard case .start(1) = machine.value(1) else { Issue.record("first"); return }
        guard case .none = machine.value(2) else { Issue.record("second started early"); return }
        guard case .none = machine.value(3) else { Issue.record("third started early"); return }
        guard case .none = machine.sourceCompleted() else { Issue.record("completed early"); return }
        guard case .start(2) = machine.innerCompleted() else { Issue.record("queued value 2"); return }
        guard case .start(3) = machine.innerCompleted() else { Issue.record("queued value 3"); return }
        guard case .complete = machine.innerCompleted() else { Issue.record("not completed"); return }
    }

    @Test func counting_takeSkipTakeLast() {
        var take = CountingStateMachine<Int>(.take, count: 2)
        #expect(take.value(1) == .pass)
        #expect(take.value(2) == .passAndComplete)
        #expect(take.value(3) == .drop)
        var skip = CountingStateMachine<Int>(.skip, count: 1)
        #expect(skip.value(1) == .drop)
        #expect(skip.value(2) == .pass)
        var last = CountingStateMachine<Int>(.takeLast, count: 2)
        for value in 1...5 { #expect(last.value(value) == .drop) }
        #expect(last.completed() == .flushAndComplete(count: 2))
        #expect(last.buffer == [4, 5])
        #expect(CountingStateMachine<Int>(.take, count: 0).completesAtOnce)
    }

    @Test func sequence_startsTheNextOnlyAfterTheActiveCompleted() {
        var machine = SequenceStateMachine(count: 2)
        #expect(machine.value(at: 1) == .none)  // not active yet
        #expect(machine.value(at: 0) == .pass)
        #expect(machine.completed(at: 0) == .start(index: 1))
        #expect(machine.completed(at: 1) == .complete)
        var failing = SequenceStateMachine(count: 2)
        #expect(failing.failed(at: 0) == .fail)
        #expect(failing.completed(at: 0) == .none)
    }
}
