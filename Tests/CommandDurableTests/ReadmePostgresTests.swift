// swift-format-ignore-file: OrderedImports
// The README's "Across machines" example, exactly (scripts/check-readme.sh compares the two; it also
// builds pasted alone). The README's block starts with its own import, below this file's: the
// import-ordering rule is off here.
import CommandDurable
import Foundation
import Testing

// README begin
import CommandDurablePostgres

struct Thumbnail: DurableWorkflow {
    static let name = "thumbnail"  // stable across releases: runs are stored by it

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<String> {
        let image = flow.step("download") { _ in Command.just("\(input).jpg") }  // Command<String>
        return flow.step("resize", after: image) { _, file async throws -> String in "\(file)@256" }  // async
    }
}

// In the web process: record a run for the workers (returns once it is committed; runs nothing here).
func enqueueThumbnail(database: String) async throws -> String {
    // database: "postgresql://app@db.internal:5432/app" (the password from PGPASSWORD or ~/.pgpass)
    let store = try await DurableStore(postgres: database)  // the schema is made if missing
    try store.register(Thumbnail.self)
    let run = try await store.enqueue(Thumbnail.self, id: "photo-7", input: "cat")
    return try await run.value  // arrives when the workers have ended the run (LISTEN), wherever they are
}

// On every worker host: claim ready steps of registered workflows, from any run, until stopped.
func startWorker(database: String) async throws -> DurableWorker {
    let store = try await DurableStore(postgres: database)
    try store.register(Thumbnail.self)
    return try store.work(concurrency: 8)  // `await worker.stop()` drains: running steps end and are recorded
}
// README end

@Suite struct ReadmePostgresTests {
    @Test func theReadmeExample_runs_asWritten() async throws {
        guard let server = try await SharedPostgres.available() else { return }
        let database = try await server.makeDatabase()
        let worker = try await startWorker(database: database)
        #expect(try await enqueueThumbnail(database: database) == "cat.jpg@256")
        await worker.stop()
        #expect(worker.running == 0)
    }
}
