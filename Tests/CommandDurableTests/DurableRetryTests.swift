import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// `a` (1), then `b` (fails while `Probe.failuresLeft[input]` lasts, then its attempt), then `c` (a + b).
struct Retried: DurableWorkflow {
    static let name = "retried"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
        let a = flow.step("a") { _ in Probe.value("\(input)/a", 1) }
        let b = flow.step("b", after: a) { context, _ in Probe.flaky(input, context) }
        return flow.step("c", after: a, b) { _, a, b in Probe.value("\(input)/c", a + b) }
    }
}

/// A failed (or cancelled) run, run again from where it ended: completed steps kept, the failed one and
/// those after it run again, its attempt numbers going on.
@Suite struct DurableRetryTests {
    enum Mode: String, CaseIterable, Sendable, CustomStringConvertible {
        /// `retry(W.self, runID:)`: run here.
        case here
        /// `retry(runID:)`: worked by a worker.
        case workers
        var description: String { rawValue }
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aFailedRun_retried_keepsItsCompletedSteps(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Retried.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(mode)-retry"
        Probe.failuresLeft.withLock { $0[tag] = 1 }
        let failed = try await store.start(Retried.self, id: "r", input: tag)
        await #expect(throws: (any Error).self) { _ = try await failed.value }
        #expect(try await store.runs().first?.state == .failed)
        await #expect(throws: DurableError.notRetryable(run: "r", state: .running)) {
            try await store.retry(runID: "r")
            try await store.retry(runID: "r")
        }
        // The first retry above went through: the run is running again.
        let value: Int
        if mode == .here {
            try await store.cancel(runID: "r")
            let run = try await store.retry(Retried.self, runID: "r")
            value = try await run.value
        } else {
            let worker = try store.work(concurrency: 2)
            let run = try #require(try await store.run(Retried.self, id: "r"))
            value = try await run.value
            await worker.stop()
        }
        #expect(value == 3)  // a (1) + b's attempt 2
        let record = try #require(try await store.runs().first)
        #expect(record.state == .completed && record.error == nil)
        #expect(Probe.counter.count("\(tag)/a") == 1, "a completed before the failure: not run again")
        #expect(Probe.counter.count("\(tag)/flaky") == 2)
        #expect(record.steps.first { $0.id == "b" }?.attempts == 2)
        await #expect(throws: DurableError.notRetryable(run: "r", state: .completed)) {
            try await store.retry(runID: "r")
        }
        await #expect(throws: DurableError.unknownRun("nobody")) { try await store.retry(runID: "nobody") }
    }
}
