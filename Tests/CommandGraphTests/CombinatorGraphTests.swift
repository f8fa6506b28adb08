import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

/// A value and a completion, sent from another thread (the work of a real command).
private func work(_ value: Int, log: Locked<[String]>? = nil, name: String) -> Command<Int> {
    let command = Command<Int> { result in
        log?.withLock { $0.append("start \(name)") }
        DispatchQueue.global().async {
            log?.withLock { $0.append("finish \(name)") }
            result.succeed(value)
        }
        return nil
    }
    command.name = name
    return command
}

/// Waits for a command's terminal event without blocking a thread.
private func outcome<Output>(of command: Command<Output>) async -> [CommandEvent<Output>] {
    let events = Locked<[CommandEvent<Output>]>([])
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        command.execute(on: .immediate) { event in
            events.withLock { $0.append(event) }
            if event.isTerminal { continuation.resume() }
        }
    }
    return events.withLock { $0 }
}

/// Sends `values` values and completes; says when it is released.
private final class Source: Command<Int>, @unchecked Sendable {
    // Immutable after init.
    let count: Int
    let released: Checkpoint

    init(values: Int, released: Checkpoint) {
        self.count = values
        self.released = released
        super.init()
    }

    override func run(_ result: CommandResult<Int>) -> (any Cancelable)? {
        for value in 0..<count { result.send(value) }
        result.complete()
        return nil
    }

    deinit { released.fulfill() }
}

@Suite struct CombinatorGraphTests {
    /// The original README's graph: six commands 0...5, each on its own queue; 3 runs after 1 and 2
    /// completed, 0 after 3 and 4; the output combines 0 and 5 with a reduce adding their values.
    @Test func originalReadmeGraph_respectsEveryDependency_andAddsTheValues() async {
        let log = Locked<[String]>([])
        let commands = (0...5).map { work($0 * 10 + 1, log: log, name: "\($0)") }
        commands[3].addDependency(commands[1])
        commands[3].addDependency(commands[2])
        commands[0].addDependency(commands[3])
        commands[0].addDependency(commands[4])
        let output = combineLatest(commands[0], commands[5]) { $0 + $1 }
        let events = await outcome(of: output)
        #expect(events.compactMap(\.value) == [1 + 51])
        #expect(events.last.map { if case .completed = $0 { true } else { false } } == true)
        let order = log.withLock { $0 }
        func position(_ entry: String) -> Int { order.firstIndex(of: entry) ?? .max }
        #expect(order.count == 12)  // each of the six started and finished once
        for (dependent, dependency) in [(3, 1), (3, 2), (0, 3), (0, 4)] {
            #expect(position("finish \(dependency)") < position("start \(dependent)"))
        }
    }

    @Test func sharedNode_runsOnce_andEveryConsumerSeesAllItsValues() async {
        let runs = Locked(0)
        let shared = Command<Int> { result in
            runs.withLock { $0 += 1 }
            result.send(1)
            result.send(2)
            result.complete()
            return nil
        }
        let tens = shared.map { $0 * 10 }
        let hundreds = shared.map { $0 * 100 }
        let events = await outcome(of: Command.merge([tens, hundreds]))
        #expect(runs.withLock { $0 } == 1)
        #expect(events.compactMap(\.value).sorted() == [10, 20, 100, 200])
    }

    @Test func cancellingOneConsumer_cancelsASharedInputOnlyWhenNoConsumerIsLeft() {
        let m = Marbles()
        let shared = m.input("1-2-3-4-5|")
        let first = shared.map { $0 }
        let second = shared.map { $0 }
        InlineExecution.$isOn.withValue(true) {
            first.execute(on: .immediate) { _ in }
            second.execute(on: .immediate) { _ in }
            m.scheduler.advance(by: .zero)
            first.cancel()
            #expect(!shared.isCancelled)
            m.scheduler.advance(by: m.tick * 2)
            #expect(!shared.isCancelled)
            second.cancel()
            #expect(shared.isCancelled)
        }
        // Executing a shared input directly pins it: losing its consumers does not cancel it.
        let m2 = Marbles()
        let pinned = m2.input("1-2|")
        let consumer = pinned.map { $0 }
        InlineExecution.$isOn.withValue(true) {
            pinned.execute(on: .immediate) { _ in }
            consumer.execute(on: .immediate) { _ in }
            consumer.cancel()
            #expect(!pinned.isCancelled)
            pinned.cancel()
        }
    }

    @Test func tenThousandStageMapChain_buildsRunsAndIsReleased_withoutGrowingTheStack() async {
        let stages = 10_000
        let sourceReleased = Checkpoint()
        do {
            let source = Source(values: 10, released: sourceReleased)
            var node: Command<Int> = source
            for _ in 0..<stages { node = node.map { $0 + 1 } }
            let events = await outcome(of: node)
            #expect(events.compactMap(\.value) == Array(stages..<(stages + 10)))
        }
        // The chain released its head once it ended: nothing kept it (waited for, not polled).
        #expect(await sourceReleased.wait())
    }

    /// A running 10,000-stage chain cancelled from its last node, on a thread with a 512 KiB stack (an
    /// Apple secondary thread's size): the cancel walks up the chain at constant depth (it used to
    /// recurse about 11 frames a stage and overflowed at 390 stages), and every stage ends cancelled.
    @Test func tenThousandStageMapChain_cancelledFromItsEnd_onA512KiBThread() async {
        let stages = 10_000
        // Sends one value when it runs, then runs until cancelled (its cancelable keeps the result).
        let source = Command<Int> { result in
            result.send(0)
            return BlockCancelable { withExtendedLifetime(result) {} }
        }
        var node: Command<Int> = source
        var all: [Command<Int>] = []
        for _ in 0..<stages {
            node = node.map { $0 + 1 }
            all.append(node)
        }
        let first = Checkpoint()
        let ended = Checkpoint()
        let last = node
        last.execute(on: .immediate) { event in
            if event.value != nil { first.fulfill() }
            if event.isTerminal { ended.fulfill() }
        }
        #expect(await first.wait())
        let cancelled = Checkpoint()
        let thread = Thread {
            last.cancel()
            cancelled.fulfill()
        }
        thread.stackSize = 512 * 1024
        thread.start()
        #expect(await cancelled.wait())
        #expect(await ended.wait())
        #expect(all.allSatisfy { $0.state.isTerminal })
        #expect(source.state.isTerminal)
    }

    @Test func combinatorGraph_isReleasedAfterItEnded() async {
        let released = Checkpoint()
        let inner = Checkpoint()
        do {
            let a = Source(values: 1, released: released)
            let b = Source(values: 2, released: inner)
            let output = combineLatest(a.map { $0 * 2 }, b.flatMap { value in work(value, name: "inner") }) { $0 + $1 }
            let events = await outcome(of: output)
            #expect(events.compactMap(\.value).sorted() == [0, 1])
        }
        #expect(await inner.wait())
        // Released by the threads that ran them, shortly after the end: wait for the events.
        #expect(await released.wait())
    }

    @Test func retryAndTimeout_onTheRealClock() async {
        let attempts = Locked(0)
        let flaky = Command<Int>.retry(3) {
            Command<Int> { result in
                let attempt = attempts.withLock { count -> Int in
                    count += 1
                    return count
                }
                if attempt < 3 {
                    result.fail(CommandError(code: .invalidArgument, command: "flaky", message: "try again"))
                } else {
                    result.succeed(attempt)
                }
                return nil
            }
        }
        let events = await outcome(of: flaky)
        #expect(events.compactMap(\.value) == [3])
        let never = Command<Int> { result in BlockCancelable { _ = result } }
        let timedOut = await outcome(of: never.timeout(.milliseconds(20)))
        #expect((timedOut.last?.error as? CommandError)?.code == .timedOut)
        #expect(never.isCancelled)
    }
}
