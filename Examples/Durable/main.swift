// swift run Durable [--crash-after N] [--store PATH]
//
// A small durable pipeline: four files are hashed and compressed, each uploaded (to a server on
// 127.0.0.1 this program starts: nothing leaves the machine) with its checksum, then a manifest of
// the uploads is written. Every step is recorded in an SQLite store (default: a file in the temporary
// folder). `--crash-after N` kills this process with SIGKILL once N steps are recorded; run it again
// without the flag and it resumes: it prints the steps it skipped (recorded before the crash) and those
// it ran (again, for a step the crash interrupted). A run that ends removes the store.
import CommandDurable
import CommandNetwork
import CommandNetworkTesting
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String) -> String? {
    arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
}
let crashAfter = option("--crash-after").flatMap(Int.init)
let storePath =
    option("--store")
    ?? FileManager.default.temporaryDirectory.appendingPathComponent("awesomecommand-durable.sqlite").path

/// The files to work on: made in the temporary folder, the same bytes every time.
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("awesomecommand-durable-files")
try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
let names = ["alpha", "beta", "gamma", "delta"]
for (index, name) in names.enumerated() {
    let bytes = Data((0..<(20_000 * (index + 1))).map { UInt8(($0 / (7 + index)) % 251) })
    try bytes.write(to: folder.appendingPathComponent("\(name).bin"))
}

/// The uploads land here; its address changes from run to run, so steps read it, the input does not.
let received = Locked<[String: Int]>([:])
let server = try LoopbackHTTPServer { request in
    received.withLock { $0[request.path] = request.body.count }
    return .response(status: 201, body: Data("stored \(request.path)".utf8))
}

/// What this process ran, by step id, with the attempt.
let ranHere = Locked<[String: Int]>([:])

/// A command that does `work` on a global queue and sends its result (the steps' real work).
func working<Value: Sendable>(_ step: StepContext, _ work: @escaping @Sendable () throws -> Value) -> Command<Value> {
    Command<Value> { result in
        ranHere.withLock { $0[step.stepID] = step.attempt }
        DispatchQueue.global().async {
            do { result.succeed(try work()) } catch { result.fail(error) }
        }
        return nil
    }
}

/// FNV-1a, 64 bits, in hex: a checksum of the file's bytes.
func checksum(_ data: Data) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in data { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    return String(hash, radix: 16)
}

/// Run-length encoding: (count, byte) pairs.
func compress(_ data: Data) -> Data {
    var out = Data()
    var index = data.startIndex
    while index < data.endIndex {
        let byte = data[index]
        var run = 1
        while index + run < data.endIndex && data[index + run] == byte && run < 255 { run += 1 }
        out.append(UInt8(run))
        out.append(byte)
        index += run
    }
    return out
}

struct Pipeline: DurableWorkflow {
    static let name = "example-pipeline"
    struct Input: Codable, Sendable { var folder: String; var files: [String] }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<String> {
        var uploads: [DurableStep<Int>] = []
        for file in input.files {
            let url = URL(fileURLWithPath: input.folder).appendingPathComponent("\(file).bin")
            let hashed = flow.step("hash \(file)") { context in
                working(context) { checksum(try Data(contentsOf: url)) }
            }
            let compressed = flow.step("compress \(file)") { context in
                working(context) { () -> String in
                    let packed = url.appendingPathExtension("rle")
                    try compress(try Data(contentsOf: url)).write(to: packed)
                    return packed.path
                }
            }
            uploads.append(
                flow.step("upload \(file)", after: hashed, compressed, retry: .attempts(3)) { context, sum, packed in
                    ranHere.withLock { $0[context.stepID] = context.attempt }
                    var request = URLRequest(url: server.url("/\(file)"))
                    request.setValue(sum, forHTTPHeaderField: "X-Checksum")
                    request.setValue(context.idempotencyKey, forHTTPHeaderField: "Idempotency-Key")
                    let body = (try? Data(contentsOf: URL(fileURLWithPath: packed))) ?? Data()
                    return UploadCommand(request: request, body: body).map { $0.status }
                })
        }
        return flow.step("manifest", waitingFor: uploads) { context in
            working(context) { "\(input.files.count) files uploaded" }
        }
    }
}

let store = try DurableStore(path: storePath, durability: .full)
try store.register(Pipeline.self)
let before = try await store.runs(.unfinished)
if let crashAfter {
    // Watches the records from a task of its own and kills this process once enough are committed.
    Task {
        while true {
            let recorded =
                (try? await store.runs().first?.steps.filter { $0.state == .completed }.count) ?? 0
            if recorded >= crashAfter {
                print("crash: \(recorded) steps recorded; SIGKILL")
                fflush(nil)
                kill(getpid(), SIGKILL)
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}
if !before.isEmpty { print("resuming \(before.map(\.id)) from \(storePath)") }
let run = try await store.start(Pipeline.self, id: "batch-1", input: .init(folder: folder.path, files: names))
let value = try await run.value
let record = try await store.runs().first
let ran = ranHere.withLock { $0 }
for step in record?.steps ?? [] {
    if let attempt = ran[step.id] {
        print("ran     \(step.id) (attempt \(attempt))")
    } else {
        print("skipped \(step.id) (recorded before)")
    }
}
print("value: \(value); the server received \(received.withLock { $0.count }) uploads")
store.close()
server.stop()
try? FileManager.default.removeItem(atPath: storePath)
try? FileManager.default.removeItem(atPath: storePath + "-wal")
try? FileManager.default.removeItem(atPath: storePath + "-shm")
print("run completed; store removed")
