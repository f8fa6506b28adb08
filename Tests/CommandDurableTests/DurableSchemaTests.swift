import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// The schema, written once with ordered migrations: a store made by an earlier version of this library
/// is upgraded in place, its records kept.
@Suite struct DurableSchemaTests {
    /// `Fixtures/store-v1.sqlite`: made by this library at schema version 1 (commit 41a4826's `swift run
    /// Durable --crash-after 3`, killed with `SIGKILL`: the run "batch-1" of workflow "example-pipeline",
    /// 8 steps completed, 4 running, 1 pending).
    static var fixture: URL? {
        Bundle.module.url(forResource: "store-v1", withExtension: "sqlite", subdirectory: "Fixtures")
    }

    static func indexes(_ store: DurableStore) async throws -> Set<String> {
        Set(
            try await DurableMeasurements.query(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'", on: store
            ).compactMap { $0.first?.string })
    }

    @Test func aStoreOfSchemaVersion1_isUpgradedInPlace_keepingItsRecords() async throws {
        let fixture = try #require(Self.fixture)
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("old.sqlite")
        try FileManager.default.copyItem(atPath: fixture.path, toPath: path)
        do {
            let store = try DurableStore(path: path)
            defer { store.close() }
            let version = try await DurableMeasurements.query("PRAGMA user_version", on: store).first?.first?.int
            #expect(version == 5)
            #expect(
                try await Self.indexes(store) == [
                    "unfinished_runs", "ended_runs", "live_steps", "running_steps", "ready_steps", "leased_steps",
                    "deadline_runs", "due_schedules", "child_runs", "queue_starts_by_time", "queued_running",
                    "queued_ready", "changes_by_time",
                ])
            // Each pending step counts its predecessors not completed; every step has its run's workflow.
            let steps = try await DurableMeasurements.query(
                "SELECT position, state, after, waiting, workflow FROM steps ORDER BY position", on: store)
            let completed = Set(steps.filter { $0[1].string == "completed" }.compactMap { $0[0].int })
            let pending = steps.filter { $0[1].string == "pending" }
            #expect(!pending.isEmpty)
            for step in pending {
                let after = Set((step[2].string ?? "").split(separator: ",").compactMap { Int64($0) })
                #expect(step[3].int == Int64(after.subtracting(completed).count), "\(step)")
            }
            #expect(steps.allSatisfy { $0[4].string == "example-pipeline" })
            let plan = try await DurableMeasurements.query(
                "EXPLAIN QUERY PLAN UPDATE steps SET lease_until = 0 WHERE owner = 'x' AND state = 'running'",
                on: store
            ).compactMap { $0.last?.string }
            #expect(plan.contains { $0.contains("running_steps") }, "\(plan)")
            let runs = try await store.runs()
            #expect(runs.map(\.id) == ["batch-1"])
            let run = try #require(runs.first)
            #expect(run.state == .running && run.workflow == "example-pipeline")
            #expect(run.steps.count == 13 && run.steps.filter { $0.state == .completed }.count == 8)
            #expect(run.steps.filter { $0.state == .completed }.allSatisfy { $0.value != nil })
        }
        // Opened again: nothing to migrate, the same schema.
        let again = try DurableStore(path: path)
        defer { again.close() }
        #expect(try await DurableMeasurements.query("PRAGMA user_version", on: again).first?.first?.int == 5)
        #expect(try await again.runs().map(\.id) == ["batch-1"])
    }
}
