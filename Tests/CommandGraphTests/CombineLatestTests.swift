import CommandGraph
import CommandTestSupport
import Testing

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
