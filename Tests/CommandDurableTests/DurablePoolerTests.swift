import CommandCore
import CommandDurable
import CommandDurablePostgres
import CommandDurablePostgresTesting
import CommandTestSupport
import Foundation
import Testing

/// A store behind PgBouncer in transaction pooling mode (Debian's 1.18: no prepared statements across
/// transactions), started by the test on 127.0.0.1 in front of the throwaway server: its requests go
/// through the pooler as unnamed statements, its listening connection and schema straight to the server.
@Suite struct DurablePoolerTests {
    /// The pooler; nil (with a note) where PgBouncer is not installed, unless CI requires it
    /// (`AWESOMECOMMAND_REQUIRE_PGBOUNCER`).
    static func pooler(_ server: ThrowawayPostgres) async throws -> ThrowawayPgBouncer? {
        do {
            return try await server.startPgBouncer()
        } catch let unavailable as ThrowawayPostgres.Unavailable {
            if ProcessInfo.processInfo.environment["AWESOMECOMMAND_REQUIRE_PGBOUNCER"] != nil { throw unavailable }
            print("note: the PgBouncer case is skipped: \(unavailable)")
            return nil
        }
    }

    @Test func workersBehindPgBouncer_inTransactionMode_completeEveryRun() async throws {
        guard let server = try await SharedPostgres.available() else { return }
        guard let pooler = try await Self.pooler(server) else { return }
        defer { pooler.stop() }
        let url = try await server.makeDatabase()
        let pooled = pooler.url(for: url)
        #expect(pooled != url && pooled.contains(":\(pooler.port)/"))
        let recorder = try await DurableStore(postgres: pooled, direct: url)
        defer { recorder.close() }
        try recorder.register(DurableClaimTests.Chain.self)
        try recorder.register(DurableClaimTests.Fan.self)
        // Two worker stores, each with its requests through the pooler.
        var workers: [(store: DurableStore, worker: DurableWorker)] = []
        for _ in 0..<2 {
            let store = try await DurableStore(postgres: pooled, direct: url, durability: .normal)
            try store.register(DurableClaimTests.Chain.self)
            try store.register(DurableClaimTests.Fan.self)
            workers.append((store, try store.work(concurrency: 8)))
        }
        let chains = try await recorder.enqueue(
            DurableClaimTests.Chain.self, runs: (0..<20).map { (id: "chain-\($0)", input: $0) })
        let fans = try await recorder.enqueue(
            DurableClaimTests.Fan.self, runs: (0..<20).map { (id: "fan-\($0)", input: $0) })
        for (index, run) in chains.enumerated() { #expect(try await run.value == index + 45) }
        for (index, run) in fans.enumerated() { #expect(try await run.value == index) }
        // A run started through the pooler, and a cancel through it.
        #expect(try await recorder.start(DurableClaimTests.Chain.self, id: "here", input: 1).value == 46)
        let held = try await recorder.enqueue(DurableClaimTests.Chain.self, id: "cancelled", input: 0)
        _ = try? await recorder.cancel(runID: "cancelled")
        _ = held
        for (store, worker) in workers {
            await worker.stop()
            store.close()
        }
        let records = try await recorder.runs()
        #expect(records.count == 42)
        #expect(records.filter { $0.state == .completed }.count >= 41)
        let completedSteps = records.flatMap(\.steps).filter { $0.state == .completed }.count
        #expect(completedSteps >= 430, "20 chains of 10, 20 fans of 11, the run started here")
        // No statement prepared on the server connection that answered this.
        let prepared = try await DurableMeasurements.query("SELECT count(*) FROM pg_prepared_statements", on: recorder)
        #expect(prepared.first?.first?.int == 0)
    }
}
