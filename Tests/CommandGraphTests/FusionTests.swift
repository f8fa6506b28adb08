import CommandCore
import CommandGraph
import CommandTestSupport
import Foundation
import Testing

private struct Boom: Error {}

/// A weak reference to a node, to see which stages were fused (released unrun) and which run.
private final class WeakNode: @unchecked Sendable {
    // Set once before the graph runs; read after (the tests' own thread).
    weak var node: Operation?
    init(_ node: Operation) { self.node = node }
}

/// What a node's observer saw, and a checkpoint for its terminal event.
private final class Recorder<Value: Sendable>: Sendable {
    let values = Locked<[Value]>([])
    let terminal = Locked<CommandEvent<Value>?>(nil)
    let ended = Checkpoint()

    func record(_ event: CommandEvent<Value>) {
        if case .value(let value) = event {
            values.withLock { $0.append(value) }
        } else {
            terminal.withLock { $0 = event }
            ended.fulfill()
        }
    }

    var seen: [Value] { values.withLock { $0 } }

    var completed: Bool {
        if case .completed? = terminal.withLock({ $0 }) { return true }
        return false
    }

    var cancelled: Bool {
        if case .cancelled? = terminal.withLock({ $0 }) { return true }
        return false
    }

    var error: (any Error)? {
        switch terminal.withLock({ $0 }) {
        case .failed(let error)?: return error
        case .cancelled(let error)?: return error
        default: return nil
        }
    }
}

/// A cold source: a command whose run hands its result sink out and records its own cancel.
private final class Source: Sendable {
    let result = Locked<CommandResult<Int>?>(nil)
    let started = Checkpoint()
    let cancelled = Checkpoint()
    let command: Command<Int>

    init() {
        let (result, started, cancelled) = (self.result, self.started, self.cancelled)
        command = Command<Int> { sink in
            result.withLock { $0 = sink }
            started.fulfill()
            return BlockCancelable { cancelled.fulfill() }
        }
    }

    func send(_ value: Int) { result.withLock { $0 }?.send(value) }
}

/// Operator fusion (`Node/Fusion.swift`): stateless stages nothing else holds run inside the node that
/// consumes them; everything observable stays as it is through the nodes.
@Suite struct FusionTests {
    @Test func unheldStages_areFusedIntoTheirConsumer_andReleasedUnrun() async {
        let subject = CommandSubject<Int>(replay: .none)
        var weak: [WeakNode] = []
        var node: Command<Int> = subject.map { $0 * 10 }
        weak.append(WeakNode(node))
        node = node.filter { $0 != 20 }
        weak.append(WeakNode(node))
        let last = node.compactMap { $0 == 30 ? nil : $0 + 1 }
        node = last
        let recorder = Recorder<Int>()
        let token = last.execute(on: .immediate) { recorder.record($0) }
        #expect(weak.allSatisfy { $0.node == nil }, "the map and the filter run inside the compactMap")
        for value in 1...4 { subject.send(value) }
        subject.complete()
        #expect(await recorder.ended.wait())
        #expect(recorder.seen == [11, 41])
        #expect(recorder.completed)
        _ = token
    }

    @Test func aThousandStages_runInNodesOfAtMost32() async {
        let subject = CommandSubject<Int>(replay: .none)
        var weak: [WeakNode] = []
        var node: Command<Int> = subject
        for _ in 0..<1_000 {
            node = node.map { $0 + 1 }
            weak.append(WeakNode(node))
        }
        let recorder = Recorder<Int>()
        let token = node.execute(on: .immediate) { recorder.record($0) }
        // The last node fuses 31 stages above it, the node it then observes 31 more, and so on.
        #expect(weak.filter { $0.node != nil }.count == (1_000 + 31) / 32)
        for value in 0..<5 { subject.send(value) }
        subject.complete()
        #expect(await recorder.ended.wait())
        #expect(recorder.seen == [1_000, 1_001, 1_002, 1_003, 1_004])
        _ = token
    }

    /// Values through a fused 10,000-stage chain, sent from a thread with a 512 KiB stack (an Apple
    /// secondary thread's size): a node's fused stages are a fixed number of frames, and nodes hand
    /// values on through the engine's bounded in-place delivery.
    @Test func tenThousandFusedStages_carryValuesSentFromA512KiBThread() async {
        let subject = CommandSubject<Int>(replay: .none)
        var node: Command<Int> = subject
        for _ in 0..<10_000 { node = node.map { $0 + 1 } }
        let recorder = Recorder<Int>()
        let token = node.execute(on: .immediate) { recorder.record($0) }
        let sender = Thread {
            for value in 0..<10 { subject.send(value) }
            subject.complete()
        }
        sender.stackSize = 512 * 1024
        sender.start()
        #expect(await recorder.ended.wait())
        #expect(recorder.seen == Array(10_000..<10_010))
        _ = token
    }

    @Test func aStageTheUserHolds_isNotFused_andRunsOncePerValue() async {
        let subject = CommandSubject<Int>(replay: .none)
        let calls = Locked(0)
        let middle = subject.map { value -> Int in
            calls.withLock { $0 += 1 }
            return value * 2
        }
        let last = middle.map { $0 + 1 }
        let lastRecorder = Recorder<Int>(), middleRecorder = Recorder<Int>()
        let tokens = [
            last.execute(on: .immediate) { lastRecorder.record($0) },
            middle.observe(on: .immediate) { middleRecorder.record($0) },
        ]
        for value in 1...3 { subject.send(value) }
        subject.complete()
        #expect(await lastRecorder.ended.wait())
        #expect(await middleRecorder.ended.wait())
        #expect(lastRecorder.seen == [3, 5, 7])
        #expect(middleRecorder.seen == [2, 4, 6])
        #expect(calls.withLock { $0 } == 3, "the shared stage runs once per value")
        _ = tokens
    }

    @Test func aStageWithADependency_isNotFused_andWaitsForIt() async {
        let subject = CommandSubject<Int>(replay: .none)
        let gate = Command<Void> { _ in nil }  // ended by hand below
        var middle: Command<Int>? = subject.map { $0 * 2 }
        middle!.addDependency(gate)
        let last = middle!.map { $0 + 1 }
        middle = nil
        let recorder = Recorder<Int>()
        let token = last.execute(on: .immediate) { recorder.record($0) }
        subject.send(1)  // nobody observes the subject yet: the stage waits for `gate`
        let gateEnded = Checkpoint()
        let gateToken = gate.execute(on: .immediate) { if $0.isTerminal { gateEnded.fulfill() } }
        gate.cancel()
        #expect(await gateEnded.wait())
        #expect(await recorder.ended.wait())
        #expect(recorder.seen.isEmpty)
        // The default policy: a cancelled dependency cancels the stage, and so its consumer.
        #expect(recorder.cancelled)
        _ = (token, gateToken)
    }

    /// The error of an upstream cancel names the consumer's own input, fused or not.
    @Test func upstreamCancel_endsTheConsumerWithTheSameErrorFusedOrNot() async {
        func cancelled(holdingTheMiddle: Bool) async -> String? {
            let subject = CommandSubject<Int>(replay: .none)
            subject.name = "source"
            var middle: Command<Int>? = subject.map { $0 }
            middle!.name = "parse"
            let last = middle!.filter { _ in true }
            let held = holdingTheMiddle ? middle : nil
            middle = nil
            let recorder = Recorder<Int>()
            let token = last.execute(on: .immediate) { recorder.record($0) }
            subject.send(1)
            subject.cancel()
            #expect(await recorder.ended.wait())
            #expect(recorder.seen == [1])
            _ = (token, held)
            return (recorder.error as? CommandError).map { "\($0.code) \($0.message) \($0.dependency ?? "-")" }
        }
        let fused = await cancelled(holdingTheMiddle: false)
        let unfused = await cancelled(holdingTheMiddle: true)
        #expect(fused != nil)
        #expect(fused == unfused)
        #expect(fused?.contains("'parse' was cancelled") == true)
    }

    @Test func aThrowInAFusedStage_failsTheConsumer_andCancelsTheSource() async {
        let source = Source()
        let last = source.command.map { value -> Int in
            if value == 2 { throw Boom() }
            return value
        }.map { $0 + 100 }
        let recorder = Recorder<Int>()
        let token = last.execute(on: .immediate) { recorder.record($0) }
        #expect(await source.started.wait())
        for value in 1...3 { source.send(value) }
        #expect(await recorder.ended.wait())
        #expect(recorder.seen == [101])
        #expect(recorder.error is Boom)
        #expect(await source.cancelled.wait(), "no other consumer needs the source")
        #expect(source.command.isCancelled)
        _ = token
    }

    @Test func cancellingTheConsumer_cancelsTheSourceThroughFusedStages() async {
        let source = Source()
        let last = source.command.map { $0 }.filter { _ in true }.map { $0 }
        let recorder = Recorder<Int>()
        let token = last.execute(on: .immediate) { recorder.record($0) }
        #expect(await source.started.wait())
        source.send(1)
        last.cancel()
        #expect(await recorder.ended.wait())
        #expect(await source.cancelled.wait())
        #expect(recorder.seen == [1])
        #expect(source.command.isCancelled)
        _ = token
    }
}
