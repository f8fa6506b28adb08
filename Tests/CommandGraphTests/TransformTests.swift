import CommandTestSupport
import Testing

@testable import CommandGraph

private struct Boom: Error {}

/// Marble diagrams on a virtual clock (one character per tick; see `Marbles` in `Support/`), one
/// per rule the operator's documentation states.
@Suite struct TransformMarbleTests {
    @Test func map_filter_compactMap() {
        let m = Marbles()
        #expect(m.run(m.input("1-2|").map { $0 + $0 }) == "{11}-{22}|")
        let m2 = Marbles()
        #expect(m2.run(m2.input("1234|").filter { Int($0)! % 2 == 0 }) == "-2-4|")
        let m3 = Marbles()
        #expect(m3.run(m3.input("1a2|").compactMap { Int($0).map(String.init) }) == "1-2|")
    }

    @Test func throwingClosure_failsTheNode_andCancelsTheSource() {
        let m = Marbles()
        let source = m.input("1-2-3|")
        #expect(
            m.run(
                source.map { value -> String in
                    if value == "2" { throw Boom() }; return value
                }) == "1-#")
        #expect(source.isCancelled)
    }

    @Test func take_skip_takeLast() {
        let m = Marbles()
        let source = m.input("123-|")
        #expect(m.run(source.take(2)) == "1(2|)")
        #expect(source.isCancelled)  // take cancels its source after the n-th value
        let m2 = Marbles()
        #expect(m2.run(m2.input("123|").skip(1)) == "-23|")
        let m3 = Marbles()
        #expect(m3.run(m3.input("123|").takeLast(2)) == "---(23|)")
        let m4 = Marbles()
        #expect(m4.run(m4.input("12|").take(0)) == "|")
    }

    @Test func takeUntil_completesWhenTheTriggerSends() {
        let m = Marbles()
        #expect(m.run(m.input("1-2-3|").take(until: m.input("--t"))) == "1-|")
    }

    @Test func distinctUntilChanged_ignoreValues_handleEvents() {
        let m = Marbles()
        #expect(m.run(m.input("aabba|").distinctUntilChanged()) == "a-b-a|")
        let m2 = Marbles()
        #expect(m2.run(m2.input("12|").ignoreValues()) == "--|")
        let m3 = Marbles()
        let seen = Locked<[String]>([])
        let output = m3.input("12|").handleEvents(
            value: { value in seen.withLock { $0.append(value) } }, completed: { seen.withLock { $0.append("done") } })
        #expect(m3.run(output) == "12|")
        #expect(seen.withLock { $0 } == ["1", "2", "done"])
    }

    @Test func cancellingTheNode_cancelsItsInput() {
        let m = Marbles()
        let source = m.input("1-2-3-4|")
        #expect(m.run(source.map { $0 }, cancelAt: 3) == "1-2x")
        #expect(source.isCancelled)
    }
}

/// A throwing closure fails the node with the thrown error (`map`, and `combineLatest`'s reduce).
@Suite struct ThrowingTransformTests {
    private func source(_ name: String) -> Command<Int> {
        let command = Command<Int> { result in result.succeed(1) }
        command.name = name
        return command
    }

    /// The error `command` failed with, once it ended.
    private func failure<Output>(of command: Command<Output>) async -> (any Error)? {
        let error = Locked<(any Error)?>(nil)
        let ended = Checkpoint()
        command.execute(on: .immediate) { event in
            if case .failed(let thrown) = event { error.withLock { $0 = thrown } }
            if event.isTerminal { ended.fulfill() }
        }
        guard await ended.wait() else { return nil }
        return error.withLock { $0 }
    }

    @Test func throwingMapAndReduce_failTheNodeWithTheThrownError() async {
        let mapped = source("source").map { (value: Int) throws -> Int in throw Boom() }
        #expect(await failure(of: mapped) is Boom)
        let reduced = combineLatest(source("a"), source("b")) { (_: Int, _: Int) throws -> Int in throw Boom() }
        #expect(await failure(of: reduced) is Boom)
    }
}

/// The counting state machine as a plain value: no threads, no commands.
@Suite struct CountingStateMachineTests {
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
}
