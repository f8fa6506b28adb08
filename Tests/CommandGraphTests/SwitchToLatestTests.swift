import CommandGraph
import CommandTestSupport
import Testing

/// Marble diagrams on a virtual clock (one character per tick; see `Marbles` in `Support/`), one
/// per rule the operator's documentation states.
@Suite struct SwitchToLatestMarbleTests {
    @Test func switchToLatest_followsTheNewestInner() {
        let m = Marbles()
        let inners = Locked(["-ab|", "-cd|"])
        let commands = m.input("x-y|").map { _ in m.input(inners.withLock { $0.removeFirst() }) }
        #expect(m.run(commands.switchToLatest()) == "-a-cd|")
    }
}
