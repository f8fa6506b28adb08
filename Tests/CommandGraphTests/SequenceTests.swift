import CommandTestSupport
import Testing

@testable import CommandGraph

/// Marble diagrams on a virtual clock (one character per tick; see `Marbles` in `Support/`), one
/// per rule the operator's documentation states.
@Suite struct SequenceMarbleTests {
    @Test func then_ignoresTheFirstValues_andRunsTheNextAfterItCompleted() {
        // a:1, a:2, a:completed, then b: x, y, completed -> x, y, completed
        let m = Marbles()
        let b = m.input("xy|")
        let a = m.input("12|")
        #expect(m.run(a.then(b)) == "--xy|")
        #expect(b.dependencies.first === a)
    }

    @Test func then_firstFailing_failsTheNode_andTheNextNeverRuns() {
        let m = Marbles()
        let made = Locked(0)
        let output = m.input("1#").then { () -> Command<String> in
            made.withLock { $0 += 1 }
            return m.input("x|")
        }
        #expect(m.run(output) == "-#")
        #expect(made.withLock { $0 } == 0)
        let m2 = Marbles()
        let b = m2.input("x|")
        #expect(m2.run(m2.input("#").then(b)) == "#")
        #expect(b.state.isTerminal == false || b.isCancelled)
        #expect(b.isExecuting == false)
    }

    @Test func concat_runsEachAfterThePrevious() {
        let m = Marbles()
        #expect(m.run(m.input("1-|").concat(m.input("2|"), m.input("34|"))) == "1-234|")
        let m2 = Marbles()
        #expect(m2.run(m2.input("1#").concat(m2.input("2|"))) == "1#")
        let m3 = Marbles()
        #expect(m3.run(Command<String>.concat([])) == "|")
    }
}

/// The sequence state machine as a plain value: no threads, no commands.
@Suite struct SequenceStateMachineTests {
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
