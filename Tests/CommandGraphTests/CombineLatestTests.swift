import CommandTestSupport
import Testing

@testable import CommandGraph

private struct Boom: Error {}

/// Marble diagrams on a virtual clock (one character per tick; see `Marbles` in `Support/`), one
/// per rule the operator's documentation states.
@Suite struct CombineLatestMarbleTests {
    @Test func emitsLatestOfEach_onceAllSent_completesAfterTheLastInput() {
        // a:1, b:x, a:2, b:y, b:completed, a:completed -> (1,x), (2,x), (2,y), completed
        let m = Marbles()
        let output = combineLatest(m.input("1-2--|"), m.input("-x-y|")).map { $0 + $1 }
        #expect(m.run(output) == "-{1x}{2x}{2y}-|")
    }

    @Test func inputCompletingWithoutAValue_meansNoValueEver_butCompletion() {
        // a:1, b:completed, a:2, a:completed -> completed, no value
        let m = Marbles()
        #expect(m.run(combineLatest(m.input("1-2|"), m.input("-|")).map { $0 + $1 }) == "---|")
    }

    @Test func firstFailure_failsTheNode_andCancelsTheOtherInputs() {
        let m = Marbles()
        let other = m.input("a----|")
        #expect(m.run(combineLatest(m.input("1-#"), other).map { $0 + $1 }) == "{1a}-#")
        #expect(other.isCancelled)
    }

    @Test func arrayForm_andReduce() {
        let m = Marbles()
        let array = Command.combineLatest([m.input("1-3|"), m.input("-2|")]).map { $0.joined() }
        #expect(m.run(array) == "-{12}{32}|")
        let m2 = Marbles()
        let reduced = combineLatest(m2.input("1-3|"), m2.input("-2|")) { $0 + "+" + $1 }
        #expect(m2.run(reduced) == "-{1+2}{3+2}|")
        let m3 = Marbles()
        #expect(m3.run(Command<String>.combineLatest([]).map { $0.joined() }) == "|")
    }

    @Test func throwingReduce_failsTheNode() {
        let m = Marbles()
        let output = combineLatest(m.input("1-2|"), m.input("a|")) { (x: String, y: String) throws -> String in
            if x == "2" { throw Boom() }
            return x + y
        }
        #expect(m.run(output) == "{1a}-#")
    }

    @Test func methodForm_andThreeTypedInputs() {
        let m = Marbles()
        #expect(m.run(m.input("1|").combineLatest(m.input("a|")).map { $0 + $1 }) == "{1a}|")
        let m2 = Marbles()
        let three = combineLatest(m2.input("1---|"), m2.input("-a|"), m2.input("--x|")).map { $0 + $1 + $2 }
        #expect(m2.run(three) == "--{1ax}-|")
    }
}

/// The combineLatest state machine as a plain value: no threads, no commands.
@Suite struct CombineLatestStateMachineTests {
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
}
