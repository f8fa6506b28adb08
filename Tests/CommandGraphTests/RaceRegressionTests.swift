import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

/// Regressions found by the leak and stress tests, kept as tests.
@Suite struct RaceRegressionTests {
    /// A combinator's outbox drainer used to stop at its own "draining" flag when emissions arrived
    /// from another thread while it was sending, stranding them (found by `CombinatorLeakTests`).
    @Test func flatMap_withInnersOnOtherThreads_neverStrandsAValue() async {
        for _ in 0..<300 {
            let source = Command<Int> { result in
                DispatchQueue.global().async {
                    for value in [1, 2, 3] { result.send(value) }
                    result.complete()
                }
                return nil
            }
            let graph = source.flatMap { value in
                Command<Int> { result in
                    DispatchQueue.global().async { result.succeed(value) }
                    return nil
                }
            }
            let ended = Checkpoint()
            let values = Locked<[Int]>([])
            graph.execute(on: .queue(DispatchQueue(label: "race"))) { event in
                if case .value(let value) = event { values.withLock { $0.append(value) } }
                if event.isTerminal { ended.fulfill() }
            }
            #expect(await ended.wait(seconds: 30))
            #expect(values.withLock { $0 }.sorted() == [1, 2, 3])
        }
    }

    /// A combinator cancelled between being started and its run being called used to release its
    /// inputs while the run was about to read them (found by the long fuzz run: a crash).
    @Test func combinator_cancelledAsItStarts_keepsItsInputsUntilItsRunReturned() async {
        for _ in 0..<2_000 {
            let source = Command<Int> { result in
                result.send(1)
                return BlockCancelable { _ = result }
            }
            let node = Command.merge([source.map { $0 + 1 }, source.filter { $0 > 0 }])
            let ended = Checkpoint()
            node.execute(on: .immediate) { event in if event.isTerminal { ended.fulfill() } }
            DispatchQueue.global().async { node.cancel() }
            #expect(await ended.wait(seconds: 30))
        }
    }
    /// A value handed in place calls the observer's sink unretained (its record holds it): a consumer
    /// that cancels itself inside the value it is handed removes that record mid-delivery. It gets
    /// that value only, its sink outlives the call (under the sanitizers in CI, a sink released
    /// mid-call is a use after free), and the source goes on delivering to its other observer.
    @Test func aConsumerCancellingInsideItsInPlaceValue_getsThatValueOnly() async {
        let subject = CommandSubject<Int>(replay: .none)
        // The direct observer is on a queue, so the value is claimed in place for the stage's record.
        let direct = Locked<[Int]>([])
        let directGotThree = Checkpoint(count: 3)
        subject.execute(on: .queue(DispatchQueue(label: "direct"))) { event in
            if case .value(let value) = event {
                direct.withLock { $0.append(value) }
                directGotThree.fulfill()
            }
        }
        let stage = subject.map { $0 * 10 }
        let staged = Locked<[Int]>([])
        let ended = Checkpoint()
        stage.execute(on: .immediate) { event in
            switch event {
            case .value(let value):
                staged.withLock { $0.append(value) }
                stage.cancel()
            case .cancelled: ended.fulfill()
            default: Issue.record("unexpected \(event)")
            }
        }
        for value in 1...3 { subject.send(value) }
        #expect(await ended.wait(seconds: 30))
        #expect(staged.withLock { $0 } == [10])
        #expect(await directGotThree.wait(seconds: 30))
        #expect(direct.withLock { $0 } == [1, 2, 3])
        subject.cancel()
    }

    /// The same from two threads: a thread sends to a subject without a pause, its one consumer
    /// handed each value in place on that thread, while the test cancels the consumer from its own
    /// thread (the record removed during some delivery). The consumer got an unbroken run of the
    /// values from the first, in order, then its cancel, and nothing after it.
    @Test func aConsumerCancelledFromAnotherThread_duringInPlaceValues_getsAnUnbrokenRun() async {
        for _ in 0..<50 {
            let subject = CommandSubject<Int>(replay: .none)
            let stage = subject.map { $0 }
            let seen = Locked<(values: [Int], ended: Bool, afterEnd: Int)>(([], false, 0))
            let first = Checkpoint()
            let ended = Checkpoint()
            stage.execute(on: .immediate) { event in
                switch event {
                case .value(let value):
                    let count = seen.withLock { seen -> Int in
                        if seen.ended { seen.afterEnd += 1 }
                        seen.values.append(value)
                        return seen.values.count
                    }
                    if count == 1 { first.fulfill() }
                case .cancelled:
                    seen.withLock { $0.ended = true }
                    ended.fulfill()
                default: Issue.record("unexpected \(event)")
                }
            }
            let stop = Locked(false)
            let stopped = Checkpoint()
            DispatchQueue.global().async {
                var value = 0
                while !stop.withLock({ $0 }) {
                    subject.send(value)
                    value += 1
                }
                stopped.fulfill()
            }
            #expect(await first.wait(seconds: 60))
            stage.cancel()
            #expect(await ended.wait(seconds: 60))
            stop.withLock { $0 = true }
            #expect(await stopped.wait(seconds: 60))
            let (values, _, afterEnd) = seen.withLock { $0 }
            #expect(values == Array(0..<values.count), "an unbroken run from 0")
            #expect(afterEnd == 0)
        }
    }
}
