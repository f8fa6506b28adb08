// swift run -c release DurableWorkersCost [--postgres URL] [--rounds N] [--enqueue]
//
// What a worker's step costs on PostgreSQL, in one run, beside its floors (a throwaway server with fsync
// on, unless --postgres names a database; each case in a fresh schema; medians of N rounds, default 3):
// - the floors: libpq alone, 1, 4 and 16 connections, two transactions a round (claim rows with SELECT
//   ... FOR UPDATE SKIP LOCKED and mark them running; mark them done with their values), one row a round
//   and 50 rows a round: steps per second;
// - one worker process of concurrency 1 working runs of a 10-step chain: per step, from the first
//   step's start to the last step's end as recorded, against the one-row floor on one connection;
// - 4 worker processes of concurrency 16, on runs of a 10-step chain and on runs of 10 independent steps
//   and a join: steps per second, against the one-row floor on 16 connections and the 50-row floor on 4,
//   with the share of the cores PostgreSQL's processes took meanwhile (this machine's cores are what
//   they are: on 2 cores, 4 processes are time slicing);
// - the backlog: the same 4 processes on 100 enqueued chain runs, then on 10,000 (the first 2,000 steps
//   of it): steps per second;
// - enqueue of 10,000 runs, one after the other and in one call, on PostgreSQL and on an SQLite file.
// `--backlog` runs the backlog rows only (`--no-backlog` all but them), `--enqueue` the enqueue rows only, `--fan [RUNS]`
// the independent steps and their floor only; `--statements` (with
// `--postgres URL` of a server loading pg_stat_statements) counts the statements the server ran per step.
// Steps return at once (their value sent from another thread, as real work would). `.full` durability
// everywhere (`synchronous_commit = on`, SQLite `FULL`).
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

struct CostFan: DurableWorkflow {
    static let name = "cost-fan"
    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
        let parts = (0..<10).map { index in flow.step("p\(index)") { _ in work(input + index) } }
        return flow.step("join", waitingFor: parts) { _ in work(input) }
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
    try store.register(CostFan.self)
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
let rounds = arguments.firstIndex(of: "--rounds").flatMap { Int(arguments[$0 + 1]) } ?? 3
let cores = ProcessInfo.processInfo.activeProcessorCount

/// A fresh database (throwaway server) or, with --postgres, the given one with its store schema dropped.
func freshDatabase() async throws -> String {
    if let server { return try await server.makeDatabase() }
    try PostgresMeasurements.execute("DROP SCHEMA IF EXISTS awesomecommand CASCADE", url: base!)
    return base!
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

/// The CPU seconds (user and system) each PostgreSQL process of this machine has used, by pid.
func postgresCPU() -> [Int32: Double] {
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    var seconds: [Int32: Double] = [:]
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")"), stat[stat.startIndex..<close].hasSuffix("(postgres")
        else { continue }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the name: state is field 3; utime and stime are fields 14 and 15.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
        seconds[pid] = (user + system) / ticks
    }
    return seconds
}

struct Outcome {
    /// Steps completed per second, from the first recorded start to the last recorded end.
    var stepsPerSecond: Double
    /// The share of the machine's cores PostgreSQL's processes took while the workers worked.
    var postgresShare: Double
}

/// `runs` runs of `workflow`, enqueued in one call, then worked by `processes` worker processes of
/// `concurrency`, until `enough` steps are completed (all of them by default).
func workers<W: DurableWorkflow>(
    _ workflow: W.Type, processes: Int, concurrency: Int, runs: Int, enough: Int? = nil
) async throws -> Outcome where W.Input == Int {
    let url = try await freshDatabase()
    let store = try await DurableStore(postgres: url)
    defer { store.close() }
    try store.register(W.self)
    try await store.enqueue(W.self, runs: (0..<runs).map { (id: "run-\($0)", input: $0) })
    let total = Int(try PostgresMeasurements.number("SELECT count(*) FROM awesomecommand.steps", url: url))
    // Waited for by the runs ended (an index holds them: a count of the steps would scan every row).
    let target = max(1, min(enough ?? total, total) * runs / total)
    let cpuBefore = postgresCPU()
    let began = Date()
    var children: [Process] = []
    for _ in 0..<processes {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["--worker", url, "\(concurrency)"]
        try process.run()
        children.append(process)
    }
    let ended = "SELECT count(*) FROM awesomecommand.runs WHERE state IN ('completed', 'failed', 'cancelled')"
    try await PostgresMeasurements.wait(until: ended, reaches: Double(target), url: url, every: 0.05)
    let completed = "SELECT count(*) FROM awesomecommand.steps WHERE state = 'completed'"
    let wall = Date().timeIntervalSince(began)
    let cpuAfter = postgresCPU()
    for child in children { kill(child.processIdentifier, SIGTERM) }
    for child in children { child.waitUntilExit() }
    let used = cpuAfter.reduce(0.0) { sum, entry in sum + entry.value - (cpuBefore[entry.key] ?? 0) }
    let count = try PostgresMeasurements.number(completed, url: url)
    let span = try PostgresMeasurements.number(
        "SELECT max(ended) - min(started) FROM awesomecommand.steps WHERE state = 'completed'", url: url)
    return Outcome(stepsPerSecond: count / span, postgresShare: used / wall / Double(cores))
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

/// `--enqueue`: only the enqueue rows (one by one, and in bulk); `--backlog`: only the backlog rows.
let enqueueOnly = arguments.contains("--enqueue")
let backlogOnly = arguments.contains("--backlog")

print("PostgreSQL 15, fsync on, synchronous_commit on; \(cores) cores; medians of \(rounds) rounds")
func measured(_ label: String, _ body: () async throws -> Outcome) async throws -> Outcome {
    var outcomes: [Outcome] = []
    for _ in 0..<rounds { outcomes.append(try await body()) }
    let rate = median(outcomes.map(\.stepsPerSecond))
    let share = median(outcomes.map(\.postgresShare))
    print(
        String(
            format: "%@: %.0f steps/s (%.0f us a step), PostgreSQL %.0f%% of the cores", label, rate, 1e6 / rate,
            share * 100))
    return Outcome(stepsPerSecond: rate, postgresShare: share)
}

func backlogRows() async throws {
    let small = try await measured("backlog of 100 chain runs, 4 workers of concurrency 16") {
        try await workers(CostChain.self, processes: 4, concurrency: 16, runs: 100)
    }
    let large = try await measured("backlog of 10,000 chain runs, the first 2,000 steps") {
        try await workers(CostChain.self, processes: 4, concurrency: 16, runs: 10_000, enough: 2_000)
    }
    print(
        String(
            format: "  backlog 10,000 / backlog 100: %.2fx (goal >= 0.8x)", large.stepsPerSecond / small.stepsPerSecond)
    )
}

if backlogOnly {
    try await backlogRows()
    exit(0)
}

/// `--fan [RUNS]`: only the independent steps (RUNS runs, 300 by default) and their floor, the 50-row
/// floor on 4 connections (for a profiler: `perf record -a` meanwhile).
if let index = arguments.firstIndex(of: "--fan") {
    let runs = arguments.dropFirst(index + 1).first.flatMap { Int($0) } ?? 300
    var rates: [Double] = []
    for _ in 0..<rounds {
        let url = try await freshDatabase()
        rates.append(
            20_000
                / (try PostgresMeasurements.floor(url: url, steps: 20_000, connections: 4, batch: 50, durability: .full))
        )
    }
    print(String(format: "floor,  4 connection(s), 50 row(s) a round: %6.0f steps/s", median(rates)))
    let fans = try await measured("4 workers of concurrency 16, 10 independent steps and a join, \(runs) runs") {
        try await workers(CostFan.self, processes: 4, concurrency: 16, runs: runs)
    }
    print(String(format: "  / the 50-row floor on 4: %.2fx (goal >= 0.25x)", fans.stepsPerSecond / median(rates)))
    exit(0)
}

/// `--statements` (with `--postgres URL` of a server that loads `pg_stat_statements`): the statements the
/// server ran per step (BEGIN and COMMIT included: each is a round trip), by case.
if arguments.contains("--statements") {
    func perStep(_ label: String, _ body: () async throws -> Outcome) async throws {
        try PostgresMeasurements.execute("SELECT pg_stat_statements_reset()", url: base!)
        _ = try await body()
        let calls = try PostgresMeasurements.number(
            "SELECT sum(calls) FROM pg_stat_statements WHERE query NOT LIKE '%count(*)%' AND query NOT LIKE '%max(ended)%'",
            url: base!)
        let steps = try PostgresMeasurements.number(
            "SELECT count(*) FROM awesomecommand.steps WHERE state = 'completed'", url: base!)
        print(String(format: "%@: %.1f statements a step (%.0f for %.0f steps)", label, calls / steps, calls, steps))
    }
    try await perStep("1 worker of concurrency 1, 10-step chains") {
        try await workers(CostChain.self, processes: 1, concurrency: 1, runs: 100)
    }
    try await perStep("4 workers of concurrency 16, 10 independent steps and a join") {
        try await workers(CostFan.self, processes: 4, concurrency: 16, runs: 300)
    }
    exit(0)
}

if !enqueueOnly {
    // The floors: steps per second.
    var floors: [String: Double] = [:]
    for connections in [1, 4, 16] {
        for batch in [1, 50] {
            let steps = batch == 1 ? 2_000 : 20_000
            var rates: [Double] = []
            for _ in 0..<rounds {
                let url = try await freshDatabase()
                rates.append(
                    Double(steps)
                        / (try PostgresMeasurements.floor(
                            url: url, steps: steps, connections: connections, batch: batch, durability: .full)))
            }
            floors["\(connections)x\(batch)"] = median(rates)
            print(
                String(
                    format: "floor, %2d connection(s), %2d row(s) a round: %6.0f steps/s", connections, batch,
                    median(rates)))
        }
    }
    let single = try await measured("1 worker of concurrency 1, 10-step chains") {
        try await workers(CostChain.self, processes: 1, concurrency: 1, runs: 100)
    }
    print(
        String(
            format: "  per step / the one-row floor on 1 connection: %.2fx (goal <= 1.5x)",
            floors["1x1"]! / single.stepsPerSecond))
    let chains = try await measured("4 workers of concurrency 16, 10-step chains") {
        try await workers(CostChain.self, processes: 4, concurrency: 16, runs: 300)
    }
    print(
        String(
            format: "  / the one-row floor on 16 connections: %.2fx (goal >= 0.5x)",
            chains.stepsPerSecond / floors["16x1"]!))
    let fans = try await measured("4 workers of concurrency 16, 10 independent steps and a join") {
        try await workers(CostFan.self, processes: 4, concurrency: 16, runs: 300)
    }
    print(
        String(
            format:
                "  / the one-row floor on 16 connections: %.2fx (goal >= 0.5x); / the 50-row floor on 4: %.2fx (goal >= 0.25x)",
            fans.stepsPerSecond / floors["16x1"]!, fans.stepsPerSecond / floors["4x50"]!))
    if !arguments.contains("--no-backlog") { try await backlogRows() }
}
let enqueueCount = 10_000
var postgresRounds: [Double] = []
var sqliteRounds: [Double] = []
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("durable-workers-cost-\(getpid())")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
var postgresBulk: [Double] = []
var sqliteBulk: [Double] = []
for round in 0..<rounds {
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
