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
}
