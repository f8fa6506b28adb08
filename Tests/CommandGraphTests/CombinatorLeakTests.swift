import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

private struct Boom: Error {}

private func source(_ values: [Int], fails: Bool = false, never: Bool = false) -> Command<Int> {
    Command<Int> { result in
        DispatchQueue.global().async {
            for value in values { result.send(value) }
            if fails { result.fail(Boom()) } else if !never { result.complete() }
        }
        return never ? BlockCancelable { _ = result } : nil
    }
}

/// Every command of a combinator graph is released after the graph ended, completed, failed or
/// cancelled: no cycle between commands, queues, observers and cancelables survives (checked with
/// `LeakTracker`, which waits for each command's `deinit`).
///
/// The bounds are the default 60 s: a graph here ends in milliseconds, but the test's own task resumes on
/// the concurrency pool (2 threads here), which the whole suite in parallel keeps busy: measured with a
/// probe task, a resume waited 1-5 s at times and a check's end was seen after 12 s, over the 10 s bound
/// these checks once had (their graphs had ended long before; a leak still fails, after 60 s).
@Suite struct CombinatorLeakTests {
    private func check(
        _ make: () -> Command<Int>, cancel: Bool = false, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let tracker = LeakTracker()
        do {
            let graph = make()
            tracker.track(graph)
            let ended = Checkpoint()
            graph.execute(on: .queue(DispatchQueue(label: "leak"))) { event in if event.isTerminal { ended.fulfill() } }
            if cancel { graph.cancel() }
            #expect(await ended.wait(), sourceLocation: sourceLocation)
        }
        #expect(await tracker.waitForRelease(seconds: 60) == [], sourceLocation: sourceLocation)
    }

    @Test func completedGraphs_areReleased() async {
        await check { combineLatest(source([1, 2]), source([3])) { $0 + $1 } }
        await check { zip(source([1, 2]), source([3, 4])).map { $0 + $1 } }
        await check { source([1]).merge(source([2]), source([3])) }
        await check { source([1]).then(source([2])) }
        await check { source([1, 2]).concat(source([3])) }
        await check { source([1, 2, 3]).flatMap { source([$0]) } }
        await check { source([1, 2, 3]).flatMapLatest { source([$0]) } }
        await check { source([1, 2]).take(1).skip(0).takeLast(1).distinctUntilChanged().filter { _ in true } }
        await check { Command<Int>.retry(2) { source([1], fails: true) }.catch { _ in source([9]) } }
        await check { source([1]).timeout(.seconds(30)).delay(.milliseconds(1)).throttle(.milliseconds(1)) }
    }

    @Test func failedGraphs_areReleased() async {
        await check { combineLatest(source([1], fails: true), source([], never: true)) { $0 + $1 } }
        await check { source([1, 2], fails: true).flatMap { source([$0], never: true) } }
        await check { source([], never: true).timeout(.milliseconds(5)) }
    }

    @Test func cancelledGraphs_areReleased() async {
        await check({ combineLatest(source([1], never: true), source([2], never: true)) { $0 + $1 } }, cancel: true)
        await check({ source([1], never: true).map { $0 }.take(until: source([], never: true)) }, cancel: true)
        await check({ Command<Int>.interval(.milliseconds(1)).map { $0 } }, cancel: true)
    }

    @Test func subjectsAndActions_areReleasedWithTheirOwners() async {
        let tracker = LeakTracker()
        do {
            let subject = CommandSubject<Int>()
            tracker.track(subject)
            subject.send(1)
            let action = CommandAction<Int, Int>(policy: .enqueue) { value in source([value]) }
            for observed in [action.values, action.errors.map { _ in 0 }, action.executing.map { $0 ? 1 : 0 }] {
                tracker.track(observed)
            }
            _ = try? await action.execute(1).value
        }
        #expect(await tracker.waitForRelease(seconds: 60) == [])
    }
}
