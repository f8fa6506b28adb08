// swift run -c release DurableWorkersCost [--postgres URL] [steps]
//
// What a worker's step costs on PostgreSQL, in one run, beside its floor (a throwaway server with fsync
// on, unless --postgres names a database; each case in a fresh schema):
// - the floor: libpq alone, one step at a time, two transactions per step (claim a row with SELECT ...
//   FOR UPDATE SKIP LOCKED, mark it running; mark it done with its value), `steps` steps (default 1,000);
// - one worker process of concurrency 1 working runs of a 10-step chain, one step at a time: per step,
//   from the first step's start to the last step's end as recorded;
// - 1, 2 and 4 worker processes of concurrency 4 on the same runs: steps per second (this machine's
//   cores are what they are: on 2 cores, 4 processes are time slicing);
// - enqueue of 10,000 runs, one after the other: runs per second, on PostgreSQL and on an SQLite file.
// `.full` durability everywhere (`synchronous_commit = on`, SQLite `FULL`). Medians of 3 rounds.
import CommandDurable
import CommandDurablePostgres
import CommandDurablePostgresTesting
import Dispatch
import Foundation

struct CostChain: DurableWorkflow {
    static let name = "cost-chain"
    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
        var previous = flow.step("s0") { _ in work(input) }
        for index in 1..<10 { previous = flow.step("s\(index)", after: previous) { _, value in work(value + 1) } }
        return previous
    }
}

struct OneStep: DurableWorkflow {
    static let name = "cost-one"
    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
        flow.step("only") { _ in work(input) }
    }
}

/// A step's command: its value, sent from another thread (as real work would).
func work(_ value: Int) -> Command<Int> {
    Command<Int> { result in
        DispatchQueue.global().async { result.succeed(value) }
        return nil
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())

// A worker process: --worker URL concurrency; works until SIGTERM, then drains and exits.
if arguments.first == "--worker", arguments.count == 3 {
    let store = try await DurableStore(postgres: arguments[1])
    try store.register(CostChain.self)
    let worker = try store.work(concurrency: Int(arguments[2]) ?? 4)
    signal(SIGTERM, SIG_IGN)
    let terminate = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .main)
    terminate.setEventHandler {
        Task {
            await worker.stop()
            store.close()
            exit(0)
        }
    }
    terminate.resume()
    while true { try await Task.sleep(nanoseconds: 1_000_000_000) }
}

let server: ThrowawayPostgres?
let base: String?
if let index = arguments.firstIndex(of: "--postgres"), index + 1 < arguments.count {
    base = arguments[index + 1]
    server = nil
} else {
    base = nil
    server = try await ThrowawayPostgres.start(fsync: true)
}
defer { server?.stop() }
let steps = arguments.compactMap { Int($0) }.first ?? 1_000

/// A fresh database (throwaway server) or, with --postgres, the given one with its store schema dropped.
func freshDatabase() async throws -> String {
    if let server { return try await server.makeDatabase() }
    try PostgresMeasurements.execute("DROP SCHEMA IF EXISTS awesomecommand CASCADE", url: base!)
    return base!
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

/// Runs of the 10-step chain worked by `processes` worker processes of `concurrency`: seconds per step,
/// from the first recorded start to the last recorded end.
func workers(processes: Int, concurrency: Int, runs: Int) async throws -> Double {
    let url = try await freshDatabase()
    let store = try await DurableStore(postgres: url)
    defer { store.close() }
    try store.register(CostChain.self)
    var enqueued: [DurableRun<Int>] = []
    for index in 0..<runs { enqueued.append(try await store.enqueue(CostChain.self, id: "run-\(index)", input: index)) }
    var children: [Process] = []
    for _ in 0..<processes {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["--worker", url, "\(concurrency)"]
        try process.run()
        children.append(process)
    }
    for run in enqueued { _ = try await run.value }
    for child in children { kill(child.processIdentifier, SIGTERM) }
    for child in children { child.waitUntilExit() }
    let records = try await store.runs().flatMap(\.steps)
    let first = records.compactMap(\.started).min()!, last = records.compactMap(\.ended).max()!
    return last.timeIntervalSince(first) / Double(records.count)
}

func enqueueRate(_ open: () async throws -> DurableStore, count: Int) async throws -> Double {
    let store = try await open()
    defer { store.close() }
    try store.register(OneStep.self)
    let start = Date()
    for index in 0..<count { _ = try await store.enqueue(OneStep.self, id: "e-\(index)", input: index) }
    return Double(count) / Date().timeIntervalSince(start)
}

/// Runs per second recorded by `enqueue(_:runs:)`, `count` at once (one transaction).
func bulkEnqueueRate(_ open: () async throws -> DurableStore, count: Int) async throws -> Double {
    let store = try await open()
    defer { store.close() }
    try store.register(OneStep.self)
    let entries = (0..<count).map { (id: "b-\($0)", input: $0) }
    let start = Date()
    try await store.enqueue(OneStep.self, runs: entries)
    let rate = Double(count) / Date().timeIntervalSince(start)
    let recorded = try await store.runs(.init(limit: count + 1)).count
    precondition(recorded == count, "\(recorded) runs recorded of \(count)")
    return rate
}

/// `--enqueue`: only the enqueue rows (one by one, and in bulk).
let enqueueOnly = arguments.contains("--enqueue")

print("PostgreSQL 15, fsync on, synchronous_commit on; \(ProcessInfo.processInfo.activeProcessorCount) cores")
if !enqueueOnly {
    var floorRounds: [Double] = []
    var singleRounds: [Double] = []
    for _ in 0..<3 {
        let floorURL = try await freshDatabase()
        floorRounds.append(
            try PostgresMeasurements.floor(url: floorURL, steps: steps, durability: .full) / Double(steps))
        singleRounds.append(try await workers(processes: 1, concurrency: 1, runs: steps / 10))
    }
    let floor = median(floorRounds), single = median(singleRounds)
    print(
        String(
            format: "a step, one at a time: worker %.0f us, floor (bare libpq, 2 transactions) %.0f us: %.2fx",
            single * 1e6, floor * 1e6, single / floor))
    for processes in [1, 2, 4] {
        var rounds: [Double] = []
        for _ in 0..<3 { rounds.append(try await workers(processes: processes, concurrency: 4, runs: steps / 10)) }
        let perStep = median(rounds)
        print(
            String(
                format: "%d worker process(es) of concurrency 4: %.0f steps/s (%.0f us a step)", processes, 1 / perStep,
                perStep * 1e6))
    }
}
let enqueueCount = 10_000
var postgresRounds: [Double] = []
var sqliteRounds: [Double] = []
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("durable-workers-cost-\(getpid())")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
var postgresBulk: [Double] = []
var sqliteBulk: [Double] = []
for round in 0..<3 {
    let url = try await freshDatabase()
    postgresRounds.append(try await enqueueRate({ try await DurableStore(postgres: url) }, count: enqueueCount))
    let bulkURL = try await freshDatabase()
    postgresBulk.append(try await bulkEnqueueRate({ try await DurableStore(postgres: bulkURL) }, count: enqueueCount))
    let path = folder.appendingPathComponent("store-\(round).sqlite").path
    sqliteRounds.append(try await enqueueRate({ try DurableStore(path: path) }, count: enqueueCount))
    let bulkPath = folder.appendingPathComponent("bulk-\(round).sqlite").path
    sqliteBulk.append(try await bulkEnqueueRate({ try DurableStore(path: bulkPath) }, count: enqueueCount))
}
print(
    String(
        format: "enqueue of %d runs, one after the other: PostgreSQL %.0f runs/s, SQLite file %.0f runs/s",
        enqueueCount, median(postgresRounds), median(sqliteRounds)))
print(
    String(
        format:
            "enqueue of %d runs in one call (one transaction): PostgreSQL %.0f runs/s (%.1fx), SQLite file %.0f runs/s (%.1fx)",
        enqueueCount, median(postgresBulk), median(postgresBulk) / median(postgresRounds), median(sqliteBulk),
        median(sqliteBulk) / median(sqliteRounds)))
