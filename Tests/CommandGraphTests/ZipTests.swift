import CommandTestSupport
import Testing

@testable import CommandGraph

/// Marble diagrams on a virtual clock (one character per tick; see `Marbles` in `Support/`), one
/// per rule the operator's documentation states.
@Suite struct ZipMarbleTests {
    @Test func zip_pairsInOrder_andCompletesWhenAnInputIsDoneAndEmpty() {
        // a:1, a:2, b:x, a:3, a:completed, b:y, b:z -> (1,x), (2,y), (3,z), completed; b cancelled
        let m = Marbles()
        let b = m.input("--x--yz----w|")
        #expect(m.run(zip(m.input("12-3|"), b).map { $0 + $1 }) == "--{1x}--{2y}({3z}|)")
        #expect(b.isCancelled)
    }
    @Test func zip_failure_arrayForm_andEmpty() {
        let m = Marbles()
        #expect(m.run(zip(m.input("1-#"), m.input("a-b|")).map { $0 + $1 }) == "{1a}-#")
        let m2 = Marbles()
        #expect(
            m2.run(Command.zip([m2.input("12|"), m2.input("ab|"), m2.input("xy|")]).map { $0.joined() })
                == "{1ax}{2by}|")
        let m3 = Marbles()
        #expect(m3.run(Command<String>.zip([]).map { $0.joined() }) == "|")
    }
}

/// The zip state machine as a plain value: no threads, no commands.
@Suite struct ZipStateMachineTests {
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
}

/// The two-input node's rules (`zip(a, b)`, `combineLatest(a, b)`) as a plain value: no threads.
@Suite struct PairStateMachineTests {
    @Test func zip_pairsOldestFirst_andCompletesWhenACompletedSideHasNothingWaiting() {
        var machine = PairStateMachine(.zip)
        #expect(machine.value(from: .left) == .keep)
        #expect(machine.value(from: .left) == .keep)
        #expect(machine.value(from: .right) == .pair(complete: false))
        #expect(machine.leftCount == 1 && machine.rightCount == 0)
        #expect(machine.completed(.left) == .none)  // one value of the left still waits for a partner
        #expect(machine.value(from: .right) == .pair(complete: true))  // the last pairing ends it
        #expect(machine.value(from: .right) == .drop)
        #expect(machine.completed(.right) == .none)
    }

    @Test func zip_completesAtOnce_whenTheCompletedSideIsEmpty() {
        var machine = PairStateMachine(.zip)
        #expect(machine.value(from: .left) == .keep)
        #expect(machine.completed(.right) == .complete)
        #expect(machine.finished)
    }

    @Test func combineLatest_pairsLatest_onceBothSent_andCompletesWhenBothCompleted() {
        var machine = PairStateMachine(.combineLatest)
        #expect(machine.value(from: .left) == .keep)
        #expect(machine.value(from: .left) == .keep)  // replaces the latest
        #expect(machine.leftCount == 1)
        #expect(machine.value(from: .right) == .pair(complete: false))
        #expect(machine.value(from: .left) == .pair(complete: false))
        #expect(machine.completed(.left) == .none)
        #expect(machine.value(from: .right) == .pair(complete: false))  // a completed side's latest still pairs
        #expect(machine.completed(.right) == .complete)
        #expect(machine.value(from: .left) == .drop)
    }

    @Test func bothRules_failOrCancelOnce_thenDropEverything() {
        for rule in [PairStateMachine.Rule.zip, .combineLatest] {
            var failing = PairStateMachine(rule)
            #expect(failing.failed() == .fail)
            #expect(failing.failed() == .none)
            #expect(failing.cancelled() == .none)
            #expect(failing.value(from: .left) == .drop)
            var cancelled = PairStateMachine(rule)
            #expect(cancelled.cancelled() == .cancel)
            #expect(cancelled.completed(.left) == .none)
        }
    }
}
