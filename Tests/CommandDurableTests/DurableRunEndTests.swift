import CommandDurable
import CommandTestSupport
import Dispatch
import Foundation
import Testing

/// Waits until `check` holds, looking every 2 ms, for up to `seconds`: for what the store records, which
/// no event of the public API announces yet.
func eventually(seconds: Double = 60, _ check: @escaping @Sendable () async -> Bool) async -> Bool {
    let seen = Checkpoint()
    let task = Task {
        while !Task.isCancelled {
            if await check() { return seen.fulfill() }
            try? await Task.sleep(nanoseconds: 2_000_000)
        }
    }
    defer { task.cancel() }
    return await seen.wait(seconds: seconds)
}

/// `a`, then `s` (a side step: nothing waits for it) and `c` (the final step) after `a`: `s` is held until
/// the test releases it.
struct SideStep: DurableWorkflow {
    static let name = "side-step"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
        let a = flow.step("a") { _ in Probe.value("\(input)/a", 1) }
        flow.step("s", after: a) { _, _ in
            Command<Int> { result in
                Probe.counter.hit("\(input)/s")
                Probe.held.withLock { $0["\(input)/s"] = result }
                return nil
            }
        }
        return flow.step("c", after: a) { _, value in Probe.value("\(input)/c", value + 10) }
    }
}

/// One rule for a run's end, whoever runs it: every step ended; its value is the final step's; a side
/// step runs and is recorded.
@Suite struct DurableRunEndTests {
    enum Mode: String, CaseIterable, Sendable, CustomStringConvertible {
        /// `start` in a process with no worker.
        case started
        /// `enqueue`, worked by another store's worker.
        case enqueued
        /// `start` while another store's worker shares the store (it may take any step).
        case startedWithWorkers

        var description: String { rawValue }
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aSideStep_runsAndIsRecorded_andTheRunEndsOnlyWithIt(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, SideStep.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(mode)-side"
        var worker: DurableWorker?
        var other: DurableStore?
        if mode != .started {
            let workers = try await fresh.place.open()
            try workers.register(SideStep.self)
            worker = try workers.work(concurrency: 4)
            other = workers
        }
        let run =
            mode == .enqueued
            ? try await store.enqueue(SideStep.self, id: "r", input: tag)
            : try await store.start(SideStep.self, id: "r", input: tag)
        // The final step recorded completed while the side step still runs: the run has not ended.
        #expect(
            await eventually {
                let steps = (try? await store.runs().first?.steps) ?? []
                return steps.first { $0.id == "c" }?.state == .completed
                    && Probe.held.withLock { $0["\(tag)/s"] } != nil
            })
        let during = try #require(try await store.runs().first)
        #expect(during.state == .running, "the run ended before its side step: \(during)")
        #expect(during.steps.first { $0.id == "s" }?.state == .running)
        #expect(!run.isFinished)
        Probe.held.withLock { $0.removeValue(forKey: "\(tag)/s") }?.succeed(7)
        #expect(try await run.value == 11)
        let record = try #require(try await store.runs().first)
        #expect(record.state == .completed)
        #expect(record.steps.map(\.state) == [.completed, .completed, .completed], "\(record.steps)")
        #expect(record.steps.allSatisfy { $0.attempts == 1 })
        #expect(Probe.counter.count("\(tag)/s") == 1)
        await worker?.stop()
        other?.close()
    }

    /// A side step that fails for good fails the run (once every step ended), though the final step
    /// completed; the steps after the failed one never run.
    struct FailingSide: DurableWorkflow {
        static let name = "failing-side"
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            let a = flow.step("a") { _ in Probe.value("\(input)/a", 1) }
            let s = flow.step("s", after: a) { _, _ in Command<Int>.fail(TestFailure(message: "side broke")) }
            flow.step("after-s", after: s) { _, value in Probe.value("\(input)/after-s", value) }
            return flow.step("c", after: a) { _, value in Probe.value("\(input)/c", value + 10) }
        }
    }

    @Test(arguments: StoreKind.allCases, [false, true])
    func aSideStepThatFails_failsTheRun_byTheSameRule(kind: StoreKind, enqueued: Bool) async throws {
        guard let fresh = try await freshStore(kind, FailingSide.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(enqueued)-failing-side"
        let worker = enqueued ? try store.work(concurrency: 4) : nil
        let run =
            enqueued
            ? try await store.enqueue(FailingSide.self, id: "f", input: tag)
            : try await store.start(FailingSide.self, id: "f", input: tag)
        do {
            _ = try await run.value
            Issue.record("the run completed although its side step failed")
        } catch {
            #expect(String(describing: error).contains("side broke"))
        }
        let record = try #require(try await store.runs().first)
        #expect(record.state == .failed)
        #expect(record.error?.contains("side broke") == true, "\(String(describing: record.error))")
        let states = Dictionary(uniqueKeysWithValues: record.steps.map { ($0.id, $0.state) })
        #expect(states == ["a": .completed, "s": .failed, "after-s": .cancelled, "c": .completed])
        #expect(Probe.counter.count("\(tag)/after-s") == 0)
        await worker?.stop()
    }
}
