// swift run DurableWorkers [--postgres URL]
//
// Durable runs worked by processes sharing one PostgreSQL database: this process records 12 runs of a
// "transcode" workflow (upload, three renditions in parallel, notify) and starts three worker processes
// (this program again, with --worker); one worker is killed with SIGKILL while it works; the others take
// its steps over once its lease (2 s) ended. Then the workers get SIGTERM, as a service manager stops
// them: each drains (`await worker.stop()`) and exits. Prints which worker did which step.
//
// Without --postgres it starts a throwaway PostgreSQL on 127.0.0.1 (PostgreSQL's server binaries must be
// installed: `apt-get install postgresql`, `brew install postgresql@16`) and deletes it at the end.
import CommandDurable
import CommandDurablePostgres
import CommandDurablePostgresTesting
import Dispatch
import Foundation

struct Transcode: DurableWorkflow {
    static let name = "transcode"
    struct Input: Codable, Sendable { var video: String }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<String> {
        let upload = flow.step("upload") { _ in work("\(input.video) uploaded") }
        let renditions = ["480p", "720p", "1080p"].map { size in
            flow.step("transcode-\(size)", after: upload) { _, _ in work(size) }
        }
        return flow.step("notify", after: renditions[0], renditions[1], renditions[2]) { _, a, b, c in
            work("\(input.video): \(a), \(b), \(c)")
        }
    }
}

/// A step's work: 150 ms on another thread, then its value.
func work(_ value: String) -> Command<String> {
    Command<String> { result in
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(150)) { result.succeed(value) }
        return nil
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
let lease = Duration.seconds(2)

// A worker process: works every registered workflow's ready steps until SIGTERM, then drains.
if arguments.first == "--worker", arguments.count == 3 {
    let name = arguments[2]
    let store = try await DurableStore(postgres: arguments[1], lease: lease)
    try store.register(Transcode.self)
    let worker = try store.work(concurrency: 4)
    print("\(name): working (pid \(getpid()))")
    signal(SIGTERM, SIG_IGN)
    let terminate = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .main)
    terminate.setEventHandler {
        Task {
            await worker.stop()  // claims nothing more; returns once its running steps are recorded
            store.close()
            print("\(name): drained, exiting")
            exit(0)
        }
    }
    terminate.resume()
    while true { try await Task.sleep(nanoseconds: 1_000_000_000) }
}

// The enqueuing process.
var server: ThrowawayPostgres?
let url: String
if let index = arguments.firstIndex(of: "--postgres"), index + 1 < arguments.count {
    url = arguments[index + 1]
} else {
    do {
        server = try await ThrowawayPostgres.start()
        url = try await server!.makeDatabase()
        print("started a throwaway PostgreSQL on 127.0.0.1:\(server!.port)")
    } catch let unavailable as ThrowawayPostgres.Unavailable {
        print("\(unavailable)\nOr give a database: swift run DurableWorkers --postgres postgresql://user@host/db")
        exit(2)
    }
}
defer { server?.stop() }

let store = try await DurableStore(postgres: url, lease: lease)
try store.register(Transcode.self)
var runs: [(id: String, run: DurableRun<String>)] = []
for index in 0..<12 {
    let id = "video-\(index)"
    runs.append((id, try await store.enqueue(Transcode.self, id: id, input: .init(video: "clip\(index).mov"))))
}
print("recorded 12 runs; starting three workers")

let names = ["worker-a", "worker-b", "worker-c"]
let me = URL(fileURLWithPath: CommandLine.arguments[0])
var workers: [String: Process] = [:]
for name in names {
    let process = Process()
    process.executableURL = me
    process.arguments = ["--worker", url, name]
    try process.run()
    workers[name] = process
}
let nameOfPid = Dictionary(uniqueKeysWithValues: workers.map { ($0.value.processIdentifier, $0.key) })

// worker-b is killed once it has begun steps (its claims are recorded with its pid).
let victim = workers["worker-b"]!
while true {
    let owners = try await store.runs().flatMap(\.steps).compactMap(\.owner)
    if owners.contains(where: { $0.contains("/\(victim.processIdentifier)/") }) { break }
    try await Task.sleep(nanoseconds: 20_000_000)
}
kill(victim.processIdentifier, SIGKILL)
print("worker-b: killed with SIGKILL (pid \(victim.processIdentifier)); its steps are taken over after its lease")

for (id, run) in runs { print("\(id): \(try await run.value)") }

for name in ["worker-a", "worker-c"] { kill(workers[name]!.processIdentifier, SIGTERM) }
for name in names {
    let process = workers[name]!
    process.waitUntilExit()
    let how =
        process.terminationReason == .uncaughtSignal
        ? "killed by signal \(process.terminationStatus)" : "exit \(process.terminationStatus)"
    print("\(name) ended: \(how)")
}

print("\nwho did which step (the store's records: each step's owner is host/pid/store):")
var counts: [String: Int] = [:]
for record in try await store.runs() {
    let line = record.steps.map { step -> String in
        let pid = step.owner.flatMap { $0.split(separator: "/").dropFirst().first }.flatMap { Int32($0) }
        let who = pid.flatMap { nameOfPid[$0] } ?? "?"
        counts[who, default: 0] += 1
        return "\(step.id)=\(who.replacingOccurrences(of: "worker-", with: ""))"
            + (step.attempts > 1 ? " (attempt \(step.attempts))" : "")
    }
    print("\(record.id): \(line.joined(separator: ", "))")
}
print("steps recorded by " + counts.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))
let takenOver = try await store.runs().flatMap(\.steps).filter { $0.attempts > 1 }.count
print("steps begun again after worker-b was killed: \(takenOver)")
store.close()
