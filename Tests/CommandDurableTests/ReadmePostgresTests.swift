// swift-format-ignore-file: OrderedImports
// The README's "Across machines" example, exactly (scripts/check-readme.sh compares the two); it uses
// the durable example's `UploadPhoto`. The README's block starts with its own import, below this file's:
// the import-ordering rule is off here.
import CommandDurable
import Foundation
import Testing

// README begin
import CommandDurablePostgres

// In the web process: record a run for the workers (returns once it is committed; runs nothing here).
func enqueueUpload(database: String) async throws -> Receipt {
    // database: "postgresql://app@db.internal:5432/app" (the password from PGPASSWORD or ~/.pgpass)
    let store = try await DurableStore(postgres: database)  // the schema is made if missing
    try store.register(UploadPhoto.self)
    let run = try await store.enqueue(UploadPhoto.self, id: "photo-7", input: .init(photo: "cat.jpg", album: "Pets"))
    return try await run.value  // arrives when the workers have ended the run (LISTEN), wherever they are
}

// On every worker host: claim ready steps of registered workflows, from any run, until stopped.
func startWorker(database: String) async throws -> DurableWorker {
    let store = try await DurableStore(postgres: database)
    try store.register(UploadPhoto.self)
    return try store.work(concurrency: 8)  // `await worker.stop()` drains: running steps end and are recorded
}
// README end

@Suite struct ReadmePostgresTests {
    @Test func theReadmeExample_runs_asWritten() async throws {
        guard let server = try await SharedPostgres.available() else { return }
        let database = try await server.makeDatabase()
        let worker = try await startWorker(database: database)
        let receipt = try await enqueueUpload(database: database)
        #expect(receipt == Receipt(path: "Pets/cat.jpg@2048", key: "upload-photo/photo-7/upload"))
        await worker.stop()
        #expect(worker.running == 0)
    }
}
