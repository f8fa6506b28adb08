import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// `first` (2), then the child run of `Sum` (2 + 3) named `kid`, then `done`: 2 * 10 + the child's value.
struct Parent: DurableWorkflow {
    static let name = "parent"
    struct Input: Codable, Sendable {
        var tag: String
        /// The child is `Stuck` (never ends; `timeout` fails it) instead of `Sum`.
        var stuck = false
        var timeout: Double?
    }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Int> {
        let first = flow.step("first") { _ in Probe.value("\(input.tag)/first", 2) }
        let kid: DurableStep<Int>
        if input.stuck {
            kid = flow.child("kid", Stuck.self, after: first) { _, _ in
                Stuck.Input(tag: "\(input.tag)/kid", timeout: input.timeout)
            }
        } else {
            kid = flow.child("kid", Sum.self, after: first) { _, _ in Sum.Input(tag: "\(input.tag)/kid") }
        }
        return flow.step("done", after: first, kid) { _, first, kid in
            Probe.value("\(input.tag)/done", first * 10 + kid)
        }
    }
}

/// A child run that sleeps 2 s (`Nap`, after its `before` step), then `done`: the child's value + 1.
struct NapParent: DurableWorkflow {
    static let name = "nap-parent"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
        let kid = flow.child("kid", Nap.self) { _ in Nap.Input(tag: input, seconds: 2) }
        return flow.step("done", after: kid) { _, kid in Command<Int>.just(kid + 1) }
    }
}

/// Child runs: recorded once as runs of their own, run where their parent runs, cancelled with it, their
/// failure the step's.
@Suite struct DurableChildTests {
    enum Mode: String, CaseIterable, Sendable, CustomStringConvertible {
        case started
        case enqueued
        var description: String { rawValue }
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aChildRun_isARunOfItsOwn_andItsValueIsTheSteps(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Parent.self, Sum.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(mode)-child"
        let worker = mode == .enqueued ? try store.work(concurrency: 2) : nil
        let run =
            mode == .enqueued
            ? try await store.enqueue(Parent.self, id: "p", input: .init(tag: tag))
            : try await store.start(Parent.self, id: "p", input: .init(tag: tag))
        #expect(try await run.value == 25)
        await worker?.stop()
        let records = try await store.runs()
        #expect(records.map(\.id).sorted() == ["p", "p/kid"])
        let child = try #require(records.first { $0.id == "p/kid" })
        #expect(child.parent == "p" && child.workflow == "sum" && child.state == .completed)
        #expect(child.output == Data("5".utf8))
        #expect(records.first { $0.id == "p" }?.steps.first { $0.id == "kid" }?.value == Data("5".utf8))
        // Each step of either run ran once.
        for step in ["first", "done", "kid/a", "kid/b", "kid/sum"] {
            #expect(Probe.counter.count("\(tag)/\(step)") == 1, "\(step)")
        }
    }

    /// A crash tested by crashing: the kill tests' worker starts a parent whose child sleeps, and kills
    /// itself once the child's sleep began; both are resumed here, the child not recorded again.
    @Test(arguments: StoreKind.allCases)
    func aChildRunCutByAKill_isResumedWithItsParent_notRecordedAgain(kind: StoreKind) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)").path
        let child = try DurableKillTests.Child(
            store: place.location, log: log, seed: 1, environment: ["DURABLE_WORKER_MODE": "child"])
        #expect(await child.exitCode() == -SIGKILL, "\(child.printed)")
        let store = try await place.open()
        defer { store.close() }
        try store.register(NapParent.self)
        try store.register(Nap.self)
        let report = try await store.resumeUnfinished()
        #expect(Set(report.resumed) == ["p", "p/kid"])
        let parent = try #require(try await store.run(NapParent.self, id: "p"))
        #expect(try await parent.value == 8)
        let records = try await store.runs()
        #expect(records.map(\.id).sorted() == ["p", "p/kid"])
        let kid = try #require(records.first { $0.id == "p/kid" })
        #expect(kid.state == .completed && kid.parent == "p")
        // The child's first step ran once, in the killed process: not again.
        #expect(kid.steps.first { $0.id == "before" }.map { $0.attempts == 1 && $0.state == .completed } == true)
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aChildRun_isCancelledWithItsParent(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Parent.self, Stuck.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(mode)-cancel-child"
        let worker = mode == .enqueued ? try store.work(concurrency: 2) : nil
        let input = Parent.Input(tag: tag, stuck: true)
        let run =
            mode == .enqueued
            ? try await store.enqueue(Parent.self, id: "p", input: input)
            : try await store.start(Parent.self, id: "p", input: input)
        #expect(await eventually { Probe.counter.count("\(tag)/kid/stuck") == 1 })
        try await store.cancel(runID: "p")
        await #expect(throws: CancellationError.self) { _ = try await run.value }
        #expect(await eventually { Probe.counter.count("\(tag)/kid/stuck-cancelled") == 1 })
        await worker?.stop()
        let states = try await store.runs().map { "\($0.id)=\($0.state)" }
        #expect(states == ["p=cancelled", "p/kid=cancelled"])
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aChildRunsFailure_failsItsStep_andTheParent(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Parent.self, Stuck.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(mode)-failed-child"
        let worker = mode == .enqueued ? try store.work(concurrency: 2) : nil
        let input = Parent.Input(tag: tag, stuck: true, timeout: 0.2)
        let run =
            mode == .enqueued
            ? try await store.enqueue(Parent.self, id: "p", input: input)
            : try await store.start(Parent.self, id: "p", input: input)
        do {
            _ = try await run.value
            Issue.record("the parent of a failed child completed")
        } catch {
            #expect("\(error)".contains("p/kid"), "\(error)")
        }
        await worker?.stop()
        let records = try await store.runs()
        #expect(records.map { "\($0.id)=\($0.state)" } == ["p=failed", "p/kid=failed"])
        #expect(records.first?.steps.first { $0.id == "kid" }?.state == .failed)
        #expect(records.first?.steps.first { $0.id == "done" }?.state == .cancelled)
        #expect(Probe.counter.count("\(tag)/done") == 0)
    }
}
