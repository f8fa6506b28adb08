import CommandCore
import CommandGraph
import CommandTestSupport
import Foundation
import Testing

/// What an observer of `command` got, and a checkpoint fulfilled by its terminal event.
private final class Recording<Output: Sendable>: Sendable {
    // Guards the events.
    private let events = Locked<[CommandEvent<Output>]>([])
    let ended = Checkpoint()

    init(_ command: Command<Output>, on context: CallbackContext = .immediate) {
        command.execute(on: context) { [self] event in
            events.withLock { $0.append(event) }
            if event.isTerminal { ended.fulfill() }
        }
    }

    var values: [Output] { events.withLock { $0.compactMap(\.value) } }
    var terminal: CommandEvent<Output>? { events.withLock { $0.last.flatMap { $0.isTerminal ? $0 : nil } } }

    /// The values once the terminal event arrived (nil if it never did within the bound).
    func valuesWhenEnded() async -> [Output]? {
        guard await ended.wait() else { return nil }
        return values
    }
}

/// Issue: values sent by a hot source right after `execute` returned were lost, because a combinator
/// subscribed to its inputs only when its run started on its queue. The rule (Combine's and
/// ReactiveCocoa's): every value a hot source sends after `execute` returned reaches the observer,
/// through any number of stages. Replay `.none` everywhere, so nothing can be recovered from a replay
/// buffer: what arrives was wired in time. No inline test mode: the real engine.
@Suite struct HotSourceTests {
    @Test func map_getsEveryValueSentRightAfterExecute() async {
        let subject = CommandSubject<Int>(replay: .none)
        let recording = Recording(subject.map { $0 * 2 })
        subject.send(1)
        subject.send(2)
        subject.send(3)
        subject.complete()
        #expect(await recording.valuesWhenEnded() == [2, 4, 6])
        #expect(recording.terminal.map { if case .completed = $0 { true } else { false } } == true)
    }

    @Test func everyOneInputOperator_getsEveryValueSentRightAfterExecute() async {
        let subject = CommandSubject<Int>(replay: .none)
        let output =
            subject
            .map { $0 + 1 }
            .filter { $0 % 2 == 0 }
            .compactMap { $0 < 100 ? $0 : nil }
            .handleEvents()
            .distinctUntilChanged()
            .skip(1)
            .take(1_000)
        let recording = Recording(output)
        for value in 0..<200 { subject.send(value) }
        subject.complete()
        #expect(await recording.valuesWhenEnded() == Array(stride(from: 4, to: 100, by: 2)))
    }

    @Test func aThousandStageChain_getsTheFirstValue() async {
        let subject = CommandSubject<Int>(replay: .none)
        var node: Command<Int> = subject
        for _ in 0..<1_000 { node = node.map { $0 + 1 } }
        let recording = Recording(node)
        subject.send(0)
        subject.complete()
        #expect(await recording.valuesWhenEnded() == [1_000])
    }

    @Test func manyInputOperators_getEveryValueSentRightAfterExecute() async {
        let a = CommandSubject<Int>(replay: .none)
        let b = CommandSubject<Int>(replay: .none)
        let zipped = Recording(zip(a.map { $0 }, b).map { $0 * 10 + $1 })
        let latest = Recording(combineLatest(a, b.filter { _ in true }) { $0 * 10 + $1 })
        let merged = Recording(Command.merge([a, b.map { $0 + 100 }]))
        a.send(1)
        b.send(2)
        a.send(3)
        b.send(4)
        a.complete()
        b.complete()
        #expect(await zipped.valuesWhenEnded() == [12, 34])
        #expect(await latest.valuesWhenEnded() == [12, 32, 34])
        #expect(await merged.valuesWhenEnded() == [1, 102, 3, 104])
    }

    @Test func flatMapAndConcat_getEveryValueSentRightAfterExecute() async {
        let outer = CommandSubject<Int>(replay: .none)
        let first = CommandSubject<Int>(replay: .none)
        let second = CommandSubject<Int>(replay: .none)
        // Inner commands made from each value: a hot subject mapped, sent to right after the value.
        let inners = [CommandSubject<Int>(replay: .none), CommandSubject<Int>(replay: .none)]
        let flat = Recording(outer.flatMap { index in inners[index].map { $0 + index * 100 } })
        let concatenated = Recording(first.concat(second.map { $0 }))
        outer.send(0)
        inners[0].send(1)
        outer.send(1)
        inners[1].send(2)
        inners[0].send(3)
        outer.complete()
        inners[0].complete()
        inners[1].complete()
        first.send(1)
        first.complete()
        second.send(2)
        second.complete()
        #expect(await flat.valuesWhenEnded() == [1, 102, 3])
        #expect(await concatenated.valuesWhenEnded() == [1, 2])
    }

    /// `CommandSubject`'s own doc example: the first value sent is not lost.
    @Test func subjectDocExample_keepsTheFirstValue() async {
        let username = CommandSubject<String>(replay: .latest)
        let password = CommandSubject<String>(replay: .latest)
        let valid = Recording(combineLatest(username, password) { !$0.isEmpty && $1.count >= 8 })
        username.send("ada")
        password.send("short")
        password.send("long enough")
        username.complete()
        password.complete()
        #expect(await valid.valuesWhenEnded() == [false, true])
    }

    /// Sent from another thread after `execute` returned on this one; observer on a serial queue.
    @Test func sendsFromAnotherThread_afterExecuteReturned_allArrive() async {
        let subject = CommandSubject<Int>(replay: .none)
        let queue = DispatchQueue(label: "observer")
        let recording = Recording(subject.map { $0 }.filter { _ in true }, on: .queue(queue))
        let sender = Thread {
            for value in 0..<1_000 { subject.send(value) }
            subject.complete()
        }
        sender.stackSize = 512 * 1024
        sender.start()
        #expect(await recording.valuesWhenEnded() == Array(0..<1_000))
    }

    /// Executed inside another command's run (an engine thread), the chain is wired before `execute`
    /// returns there too.
    @Test func executedInsideARun_isWiredBeforeExecuteReturns() async {
        let subject = CommandSubject<Int>(replay: .none)
        let chain = subject.map { $0 * 3 }
        let box = Locked<Recording<Int>?>(nil)
        let outer = Command<Void> { result in
            box.withLock { $0 = Recording(chain) }
            subject.send(1)
            subject.complete()
            result.complete()
            return nil
        }
        let outerEnded = Recording(outer)
        #expect(await outerEnded.ended.wait())
        let recording = box.withLock { $0 }
        #expect(await recording?.valuesWhenEnded() == [3])
    }

    /// Fair delivery: in `subject -> map -> filter -> observer`, while two threads keep sending, the
    /// observer gets values during the sending, not after it stopped. Each sender stops as soon as
    /// the observer has 1,000 values, or after 2,000,000 sends (the bound, which only a starved
    /// pipeline reaches: before the fix, values passed `map` and waited for the sending to stop).
    @Test func twoSendingThreads_valuesReachTheObserverDuringTheSending() async {
        let subject = CommandSubject<Int>(replay: .none)
        let received = Locked(0)
        let output = subject.map { $0 &* 2 }.filter { _ in true }
        output.execute(on: .immediate) { event in
            if event.value != nil { received.withLock { $0 += 1 } }
        }
        let sentWhenReached = Locked<[Int]>([])
        let done = Checkpoint(count: 2)
        for _ in 0..<2 {
            let sender = Thread {
                var sent = 0
                while sent < 2_000_000 && received.withLock({ $0 }) < 1_000 {
                    subject.send(sent)
                    sent += 1
                }
                sentWhenReached.withLock { $0.append(sent) }
                done.fulfill()
            }
            sender.stackSize = 512 * 1024
            sender.start()
        }
        #expect(await done.wait())
        #expect(received.withLock { $0 } >= 1_000)
        // Both stopped because the observer had its values, long before the bound.
        #expect(sentWhenReached.withLock { $0 }.allSatisfy { $0 < 2_000_000 }, "\(sentWhenReached.withLock { $0 })")
        subject.complete()
    }

    /// The two-input nodes pair and combine under their own lock while inputs deliver on two threads at
    /// once: `zip` pairs the n-th of each (each thread sends 0, 1, 2... so every pair is (n, n), in
    /// order); `combineLatest`'s pairs never go back in time on either side (each side only grows).
    @Test func zipAndCombineLatest_ofTwo_withInputsOnTwoThreads_keepOrder() async {
        let count = 20_000
        let a = CommandSubject<Int>(replay: .none)
        let b = CommandSubject<Int>(replay: .none)
        let zipped = Recording(zip(a, b))
        let latest = Recording(combineLatest(a, b))
        let done = Checkpoint(count: 2)
        for subject in [a, b] {
            let sender = Thread {
                for value in 0..<count { subject.send(value) }
                subject.complete()
                done.fulfill()
            }
            sender.stackSize = 512 * 1024
            sender.start()
        }
        #expect(await done.wait())
        let pairs = await zipped.valuesWhenEnded() ?? []
        #expect(pairs.count == count)
        #expect(pairs.enumerated().allSatisfy { $0.element.0 == $0.offset && $0.element.1 == $0.offset })
        let combined = await latest.valuesWhenEnded() ?? []
        #expect(!combined.isEmpty)
        #expect(zip(combined, combined.dropFirst()).allSatisfy { $0.0 <= $1.0 && $0.1 <= $1.1 })
        #expect(combined.last.map { $0 == (count - 1, count - 1) } == true)
    }
}
