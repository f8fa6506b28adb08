import CommandTestSupport
import Testing

@testable import CommandGraph

/// Marble diagrams on a virtual clock (one character per tick; see `Marbles` in `Support/`), one
/// per rule the operator's documentation states.
@Suite struct MergeMarbleTests {
    @Test func merge_passesValuesInArrivalOrder_completesWhenAllComplete() {
        // a:1, b:2, a:3, a:completed, b:4, b:completed -> 1, 2, 3, 4, completed
        let m = Marbles()
        #expect(m.run(m.input("1-3|").merge(m.input("-2--4|"))) == "123-4|")
    }
    @Test func merge_firstFailure_cancelsTheOthers_andEmptyCompletesAtOnce() {
        let m = Marbles()
        let other = m.input("-a---b|")
        #expect(m.run(Command.merge([m.input("--#"), other])) == "-a#")
        #expect(other.isCancelled)
        let m2 = Marbles()
        #expect(m2.run(Command<String>.merge([])) == "|")
    }
}

/// The merge state machine as a plain value: no threads, no commands.
@Suite struct MergeStateMachineTests {
    @Test func merge_countsCompletions() {
        var machine = MergeStateMachine(inputs: 2)
        #expect(machine.completed() == .none)
        #expect(machine.completed() == .complete)
        #expect(machine.failed() == .none)
        #expect(machine.cancelled(at: 1) == .none)
        var empty = MergeStateMachine(inputs: 0)
        #expect(empty.start() == .complete)
    }
}
