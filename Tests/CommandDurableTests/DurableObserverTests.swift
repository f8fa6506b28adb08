import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// `a` (1), then `b` (fails once, retried: `.attempts(2)`), then `c` (a + b).
struct Observed: DurableWorkflow {
    static let name = "observed"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
        let a = flow.step("a") { _ in Probe.value("\(input)/a", 1) }
        let b = flow.step("b", after: a, retry: .attempts(2)) { context, _ in Probe.flaky(input, context) }
        return flow.step("c", after: a, b) { _, a, b in Probe.value("\(input)/c", a + b) }
    }
}

/// Collects what it observes; fulfils `ended` at a run's end.
final class Recorder: DurableObserver {
    let changes = Locked<[DurableChange]>([])
    let ended = Checkpoint()

    func store(_ store: DurableStore, observed change: DurableChange) {
        changes.withLock { $0.append(change) }
        if change.kind == .runEnded { ended.fulfill() }
    }
}

/// Observers hear of this process's changes, in order, off the store's thread, with durations.
@Suite struct DurableObserverTests {
    enum Mode: String, CaseIterable, Sendable, CustomStringConvertible {
        case started
        case enqueued
        var description: String { rawValue }
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func anObserver_hearsARunsChanges_inOrder(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Observed.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let recorder = Recorder()
        store.add(observer: recorder)
        let tag = "\(kind)-\(mode)-observed"
        Probe.failuresLeft.withLock { $0[tag] = 1 }
        let worker = mode == .enqueued ? try store.work(concurrency: 2) : nil
        let run =
            mode == .enqueued
            ? try await store.enqueue(Observed.self, id: "o", input: tag)
            : try await store.start(Observed.self, id: "o", input: tag)
        #expect(try await run.value == 3)
        #expect(await recorder.ended.wait())
        await worker?.stop()
        let seen = recorder.changes.withLock { $0 }.map(\.description)
        #expect(
            seen == [
                "runCreated o", "stepStarted o/a #1", "stepCompleted o/a #1", "stepStarted o/b #1",
                "stepRetrying o/b #1", "stepStarted o/b #2", "stepCompleted o/b #2", "stepStarted o/c #1",
                "stepCompleted o/c #1", "runEnded o completed",
            ], "\(seen)")
        let changes = recorder.changes.withLock { $0 }
        #expect(changes.allSatisfy { $0.owner == store.owner })
        #expect(changes.first { $0.kind == .stepRetrying }?.error?.contains("flaky attempt 1") == true)
        #expect(changes.filter { $0.kind == .stepCompleted }.allSatisfy { $0.duration != nil })
        // Released: no longer told.
        store.remove(observer: recorder)
        _ = try await store.start(Observed.self, id: "again", input: "\(tag)-again").value
        #expect(recorder.changes.withLock { $0.count } == seen.count)
    }
}
