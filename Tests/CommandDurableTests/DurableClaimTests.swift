import CommandCore
import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// How workers claim steps: ready steps in one statement (as many as a worker has room for), a chain's
/// next step handed over by the completion before it, a backoff that holds no slot, and statement texts
/// that do not depend on how many ids a list holds.
@Suite struct DurableClaimTests {
    /// Ten steps, each after the one before: 0, 1, ..., 9 added to the input.
    struct Chain: DurableWorkflow {
        static let name = "claims-chain"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
            var previous = flow.step("s0") { _ in Command.just(input) }
            for index in 1..<10 {
                previous = flow.step("s\(index)", after: previous) { _, value in Command.just(value + index) }
            }
            return previous
        }
    }

    /// Ten independent parts, then a join after all of them.
    struct Fan: DurableWorkflow {
        static let name = "claims-fan"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
            let parts = (0..<10).map { index in flow.step("p\(index)") { _ in Command.just(input + index) } }
            return flow.step("join", waitingFor: parts) { _ in Command.just(input) }
        }
    }

    /// One step that fails once, then waits out a 2 s backoff.
    struct RetryOnce: DurableWorkflow {
        static let name = "claims-retry-once"
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            flow.step("flaky", retry: .attempts(2, backoff: .constant(.seconds(2)))) { context in
                Probe.flaky(input, context)
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aChain_onOneWorker_isHandedOverStepByStep(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Chain.self) else { return }
        defer { fresh.close() }
        let runs = try await fresh.store.enqueue(Chain.self, runs: (0..<3).map { (id: "chain-\($0)", input: $0) })
        let worker = try fresh.store.work(concurrency: 1)
        for (index, run) in runs.enumerated() { #expect(try await run.value == index + 45) }
        await worker.stop()
        let claims = worker.claims
        // Each run's first step found by a look; the nine after it handed over by their predecessors.
        #expect(claims.byLooks == 3 && claims.handedOver == 27, "\(claims)")
    }

    @Test(arguments: StoreKind.allCases)
    func readySteps_areClaimedTogether_andTheJoinIsHandedOver(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Fan.self) else { return }
        defer { fresh.close() }
        let run = try await fresh.store.enqueue(Fan.self, id: "fan", input: 100)
        let worker = try fresh.store.work(concurrency: 16)
        #expect(try await run.value == 100)
        await worker.stop()
        let claims = worker.claims
        #expect(claims.largestLook == 10 && claims.looks == 1 && claims.handedOver == 1, "\(claims)")
        let tokens = try await DurableMeasurements.query(
            "SELECT count(DISTINCT claim) FROM steps WHERE step_id LIKE 'p%'", on: fresh.store)
        #expect(tokens.first?.first?.int == 1, "the ten parts were claimed by one statement")
    }

    @Test(arguments: StoreKind.allCases)
    func aStepWaitingForItsBackoff_holdsNoSlot(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, RetryOnce.self, Chain.self) else { return }
        defer { fresh.close() }
        let tag = "backoff-\(kind)-\(UUID().uuidString.prefix(6))"
        Probe.failuresLeft.withLock { $0[tag] = 1 }
        let flaky = try await fresh.store.enqueue(RetryOnce.self, id: "flaky", input: tag)
        let chain = try await fresh.store.enqueue(Chain.self, id: "chain", input: 0)
        // One slot: the flaky step takes it, fails, and gives it up while its backoff runs.
        let worker = try fresh.store.work(concurrency: 1)
        #expect(try await chain.value == 45)
        #expect(try await flaky.value == 2)
        await worker.stop()
        let records = try await fresh.store.runs()
        let chainEnd = try #require(records.first { $0.id == "chain" }?.steps.compactMap(\.ended).max())
        let retry = try #require(records.first { $0.id == "flaky" }?.steps.first)
        #expect(retry.attempts == 2)
        #expect(try #require(retry.started) > chainEnd, "the chain ran during the flaky step's backoff")
    }

    @Test(arguments: StoreKind.allCases)
    func runsStartedHere_besideAWorkerOfTheSameStore_runEachStepOnce(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Sum.self) else { return }
        defer { fresh.close() }
        let worker = try fresh.store.work(concurrency: 4)
        let prefix = "beside-\(kind)-\(UUID().uuidString.prefix(6))"
        let runs = try await fresh.store.start(
            Sum.self, runs: (0..<20).map { (id: "run-\($0)", input: Sum.Input(tag: "\(prefix)-\($0)")) })
        for run in runs { #expect(try await run.value == 5) }
        await worker.stop()
        for index in 0..<20 {
            for step in ["a", "b", "sum"] {
                #expect(Probe.counter.count("\(prefix)-\(index)/\(step)") == 1, "run \(index) step \(step)")
            }
        }
    }

    /// On PostgreSQL, every statement is prepared once by its text: a list of ids is one array parameter,
    /// so no two prepared statements differ only by how many values a list holds (rows inserted go in
    /// statements of 100, 10 or 1: three texts a table).
    @Test func statementTexts_doNotDependOnHowManyIdsAListHolds() async throws {
        guard let fresh = try await freshStore(.postgres, Chain.self) else { return }
        defer { fresh.close() }
        var next = 0
        for count in [111, 7, 150, 23] {
            let runs = try await fresh.store.enqueue(
                Chain.self, runs: (next..<next + count).map { (id: "texts-\($0)", input: $0) })
            next += count
            let worker = try fresh.store.work(concurrency: 1 + count % 16)
            for run in runs { _ = try await run.value }
            await worker.stop()
            _ = try await fresh.store.runs(DurableRunFilter(states: [.completed, .failed], limit: count))
        }
        let texts = try await DurableMeasurements.query("SELECT statement FROM pg_prepared_statements", on: fresh.store)
            .compactMap { $0.first?.string }
        let inserts = texts.filter { $0.hasPrefix("INSERT INTO") }
        let others = texts.filter { !$0.hasPrefix("INSERT INTO") }
        /// A text with its placeholders' numbers and counts left out: equal for texts that differ only so.
        func shape(_ text: String) -> String {
            var shaped = text.replacingOccurrences(of: #"\$\d+"#, with: "$", options: .regularExpression)
            while shaped.contains("$, $") { shaped = shaped.replacingOccurrences(of: "$, $", with: "$") }
            return shaped
        }
        #expect(Set(others.map(shape)).count == others.count, "\(others.sorted())")
        #expect(inserts.count <= 6, "\(inserts.count) insert texts")
        #expect(others.contains { $0.contains("ANY(CAST(") }, "lists go as one array parameter")
    }
}
