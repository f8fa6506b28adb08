// swift-format-ignore-file: OrderedImports
// The README's "Durable workflows" example, exactly (scripts/check-readme.sh compares the two).
// Test-only imports stay outside the README's block, which builds pasted alone into an app's main.swift:
// the import-ordering rule is off here.
import CommandTestSupport
import Testing

// README begin
import CommandDurable
import Foundation

struct Receipt: Codable, Sendable { var path: String; var key: String }

struct UploadPhoto: DurableWorkflow {
    static let name = "upload-photo"  // stable across releases: runs are stored by it
    struct Input: Codable, Sendable { var photo: String; var album: String }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Receipt> {
        let resized = flow.step("resize") { _ in Command.just("\(input.photo)@2048") }  // Command<String>
        let token = flow.step("token", retry: .attempts(3, backoff: .exponential(initial: .seconds(1)))) { _ in
            Command.just("token-1")  // Command<String>
        }
        return flow.step("upload", after: resized, token) { context, file, token in  // values of both
            Command.just(Receipt(path: "\(input.album)/\(file)", key: context.idempotencyKey))  // Command<Receipt>
        }
    }
}

func uploadPhoto(storeFolder: URL) async throws -> Receipt {
    let store = try DurableStore(path: storeFolder.appendingPathComponent("work.sqlite"))  // created if missing
    try store.register(UploadPhoto.self)
    let report = try await store.resumeUnfinished()  // at launch: runs not ended go on where they stopped
    print("resumed \(report.resumed), not resumed \(report.notResumed.map(\.run))")
    let run = try await store.start(UploadPhoto.self, id: "photo-42", input: .init(photo: "beach.jpg", album: "Trips"))
    return try await run.value  // a DurableRun<Receipt> is a Command<Receipt>: execute, observe, depend on it
}
// README end

@Suite struct ReadmeDurableTests {
    @Test func theReadmeExample_runs_asWritten() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let receipt = try await uploadPhoto(storeFolder: folder.url)
        #expect(receipt == Receipt(path: "Trips/beach.jpg@2048", key: "upload-photo/photo-42/upload"))
        // Again: the run is recorded, its value given back without running anything.
        #expect(try await uploadPhoto(storeFolder: folder.url) == receipt)
    }
}

extension Receipt: Equatable {}
