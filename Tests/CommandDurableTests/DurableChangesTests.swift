import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// A change stream, read by a task of its own.
final class ChangeReader: Sendable {
    private typealias Wanted = (check: @Sendable ([DurableChange]) -> Bool, reached: Checkpoint)
    // Guards the changes read.
    private let seen = Locked<[DurableChange]>([])
    // Guards what `until` waits for.
    private let wanted = Locked<[Wanted]>([])
    private let task: Task<Void, Never>

    init(_ changes: DurableChanges) {
        let (seen, wanted) = (seen, wanted)
        task = Task {
            for await change in changes {
                let all = seen.withLock { seen in
                    seen.append(change)
                    return seen
                }
                for entry in wanted.withLock({ $0 }) where entry.check(all) { entry.reached.fulfill() }
            }
        }
    }

    var changes: [DurableChange] { seen.withLock { $0 } }

    /// Waits until the changes read satisfy `check` (60 s at most).
    func until(_ check: @escaping @Sendable ([DurableChange]) -> Bool) async -> Bool {
        let reached = Checkpoint()
        wanted.withLock { $0.append((check, reached)) }
        if check(changes) { return true }
        return await reached.wait()
    }

    /// Waits for the reading task's end (the loop left).
    func ended() async { await task.value }

    func cancel() { task.cancel() }
}

/// `store.changes(_:)`: this process's changes and other processes', in order, filtered, ended by the loop.
@Suite struct DurableChangesTests {
    static let expected = [
        "runCreated o", "stepStarted o/a #1", "stepCompleted o/a #1", "stepStarted o/b #1",
        "stepRetrying o/b #1", "stepStarted o/b #2", "stepCompleted o/b #2", "stepStarted o/c #1",
        "stepCompleted o/c #1", "runEnded o completed",
    ]

    @Test(arguments: StoreKind.allCases)
    func thisProcessesChanges_arriveInOrder_andBreakingEndsTheSubscription(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Observed.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-changes-here"
        Probe.failuresLeft.withLock { $0[tag] = 1 }
        let changes = store.changes()
        #expect(store.changeStreamCount == 1)
        let run = try await store.start(Observed.self, id: "o", input: tag)
        #expect(try await run.value == 3)
        var seen: [DurableChange] = []
        for await change in changes {
            seen.append(change)
            if change.kind == .runEnded { break }
        }
        #expect(seen.map(\.description) == Self.expected, "\(seen.map(\.description))")
        #expect(seen.allSatisfy { $0.workflow == "observed" && $0.owner == store.owner })
        #expect(seen.first { $0.kind == .stepRetrying }?.error?.contains("flaky attempt 1") == true)
        // The loop left: the subscription ended with it.
        #expect(await eventually { store.changeStreamCount == 0 })
    }

    @Test(arguments: StoreKind.allCases)
    func anotherStoresChanges_arrive_onceItKnowsOfTheWatch(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Observed.self) else { return }
        defer { fresh.close() }
        let worker = fresh.store
        let watcher = try await fresh.place.open()
        defer { watcher.close() }
        let reader = ChangeReader(watcher.changes())
        // The other store publishes from its next look for watchers (within about 1 s): runs are started
        // there until the watcher sees one.
        let probing = Task {
            var index = 0
            while !Task.isCancelled {
                index += 1
                _ = try? await worker.start(Observed.self, id: "probe-\(index)", input: "\(kind)-probe-\(index)").value
            }
        }
        #expect(await reader.until { $0.contains { $0.run.hasPrefix("probe-") && $0.owner == worker.owner } })
        probing.cancel()
        _ = await probing.value
        let tag = "\(kind)-changes-there"
        Probe.failuresLeft.withLock { $0[tag] = 1 }
        #expect(try await worker.start(Observed.self, id: "o", input: tag).value == 3)
        #expect(await reader.until { $0.contains { $0.run == "o" && $0.kind == .runEnded } })
        let seen = reader.changes.filter { $0.run == "o" }
        #expect(seen.map(\.description) == Self.expected, "\(seen.map(\.description))")
        #expect(seen.allSatisfy { $0.owner == worker.owner && $0.workflow == "observed" })
        #expect(seen.first { $0.kind == .stepCompleted }?.duration != nil)
        reader.cancel()
        await reader.ended()
        #expect(await eventually { watcher.changeStreamCount == 0 })
    }

    @Test func aFilter_selectsByWorkflowAndTag_andClosingTheStoreEndsTheSequence() async throws {
        guard let fresh = try await freshStore(.sqlite, Observed.self, DurableClaimTests.Chain.self) else { return }
        let store = fresh.store
        let tagged = ChangeReader(store.changes(.tagged("vip")))
        let chains = ChangeReader(store.changes(.workflow(DurableClaimTests.Chain.name)))
        _ = try await store.start(Observed.self, id: "plain", input: "changes-plain").value
        _ = try await store.start(
            Observed.self, id: "vip", input: "changes-vip", options: DurableRunOptions(tags: ["vip", "b"])
        ).value
        _ = try await store.start(DurableClaimTests.Chain.self, id: "chain", input: 1).value
        #expect(await chains.until { $0.contains { $0.run == "chain" && $0.kind == .runEnded } })
        #expect(await tagged.until { $0.contains { $0.run == "vip" && $0.kind == .runEnded } })
        #expect(Set(tagged.changes.map(\.run)) == ["vip"])
        #expect(Set(chains.changes.map(\.run)) == ["chain"])
        #expect(chains.changes.allSatisfy { $0.workflow == DurableClaimTests.Chain.name })
        // Closing the store ends every sequence: both loops leave.
        fresh.close()
        await tagged.ended()
        await chains.ended()
        #expect(store.changeStreamCount == 0)
    }

    @Test func aChange_isCodable_asTheInspectorReadsIt() throws {
        let change = DurableChange(
            kind: .stepFailed, run: "r", workflow: "w", step: "s", attempt: 2, owner: "host/1/x",
            time: Date(timeIntervalSince1970: 1_700_000_000.5), duration: .milliseconds(1_500),
            error: "<script>alert(1)</script>", state: nil)
        let json = try JSONEncoder().encode(change)
        let object = try JSONSerialization.jsonObject(with: json) as? [String: Any]
        #expect(object?["duration"] as? Double == 1.5)
        #expect(object?["time"] as? Double == 1_700_000_000.5)
        #expect(object?["kind"] as? String == "stepFailed")
        #expect(try JSONDecoder().decode(DurableChange.self, from: json) == change)
    }
}

/// The docs' list of pending uploads (WatchingAndSteeringRuns.md), as written there but for
/// `@Observable` (SwiftUI's part): reloaded at each run recorded or ended.
@MainActor final class PendingUploads {
    private(set) var ids: [String] = []
    private(set) var reloads = 0

    func follow(_ store: DurableStore) async {
        let changes = store.changes(.workflow(Observed.name))
        await reload(store)
        for await change in changes where change.kind == .runCreated || change.kind == .runEnded {
            await reload(store)
        }
    }

    private func reload(_ store: DurableStore) async {
        let pending = DurableRunFilter(workflow: Observed.name, states: [.pending, .running])
        ids = (try? await store.runs(pending).map(\.id)) ?? ids
        reloads += 1
    }
}

extension DurableChangesTests {
    @Test @MainActor func aListOfPendingUploads_followsTheStore() async throws {
        guard let fresh = try await freshStore(.sqlite, Observed.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let list = PendingUploads()
        let following = Task { await list.follow(store) }
        #expect(await eventually { await list.reloads >= 1 })
        for index in 1...3 {
            Probe.failuresLeft.withLock { $0["pending-upload-\(index)"] = 0 }
            _ = try await store.enqueue(Observed.self, id: "upload-\(index)", input: "pending-upload-\(index)")
        }
        #expect(await eventually { await list.ids == ["upload-1", "upload-2", "upload-3"] })
        let worker = try store.work(concurrency: 2)
        #expect(await eventually { await list.ids.isEmpty })
        await worker.stop()
        following.cancel()
        await following.value
        #expect(store.changeStreamCount == 0)
    }
}

/// A step that reads the run's context, and a child run that reads its own.
struct Traced: DurableWorkflow {
    static let name = "traced"

    struct Child: DurableWorkflow {
        static let name = "traced-child"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<String> {
            flow.step("inner") { context in Command.just(context.runContext["traceparent"] ?? "none") }
        }
    }

    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<String> {
        let read = flow.step("read") { context in Command.just(context.runContext["traceparent"] ?? "none") }
        let child = flow.child("child", Child.self, after: read) { _, _ in input }
        return flow.step("both", after: read, child) { _, read, child in Command.just("\(read) \(child)") }
    }
}

extension DurableChangesTests {
    @Test(arguments: StoreKind.allCases)
    func aRunsContext_reachesItsSteps_itsChild_andTheObservers_onAWorkerElsewhere(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Traced.self, Traced.Child.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let elsewhere = try await fresh.place.open()
        defer { elsewhere.close() }
        try elsewhere.register(Traced.self)
        try elsewhere.register(Traced.Child.self)
        let recorder = Recorder()
        elsewhere.add(observer: recorder)
        let worker = try elsewhere.work(concurrency: 2)
        let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let run = try await store.enqueue(
            Traced.self, id: "t", input: 1, options: DurableRunOptions(context: ["traceparent": trace]))
        #expect(try await run.value == "\(trace) \(trace)")
        await worker.stop()
        let records = try await store.runs()
        #expect(records.map(\.id) == ["t", "t/child"])
        #expect(records.allSatisfy { $0.context == ["traceparent": trace] })
        let started = recorder.changes.withLock { $0 }.filter { $0.kind == .stepStarted }
        // read, child (twice: recording the child, then reading its end on the worker's claim), inner, both.
        #expect(started.count == 5 && started.allSatisfy { $0.context == ["traceparent": trace] }, "\(started)")
        // How long the entry steps waited from their run's record; the others say nothing.
        #expect(started.filter { $0.step == "read" || $0.step == "inner" }.allSatisfy { $0.queued != nil })
        #expect(started.filter { $0.step == "both" || $0.step == "child" }.allSatisfy { $0.queued == nil })
        let created = recorder.changes.withLock { $0 }.filter { $0.kind == .runCreated }
        #expect(created.map(\.run) == ["t/child"] && created.first?.context == ["traceparent": trace])
        // Too much context is refused before anything is recorded.
        let large = DurableRunOptions(context: ["big": String(repeating: "x", count: 5_000)])
        await #expect(throws: DurableError.self) {
            try await store.enqueue(Traced.self, id: "big", input: 1, options: large)
        }
        #expect(try await store.runs(.run("big")).isEmpty)
    }
}
