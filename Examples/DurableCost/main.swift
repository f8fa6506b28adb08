// swift run -c release DurableCost [chain] [independent]
//
// What a durable step costs, in one run (median of 3 rounds each), beside its floor:
// - a chain of 1,000 durable steps (default), `.full` and `.normal`, per step, against SQLite alone on
//   a thread of its own writing each step as two transactions (insert its row, update it with its value);
// - 10,000 independent steps (default), per step, and the commits they took (group commit);
// - the cost a durable step adds to the same command run plainly (a chain of the same commands);
// - the chain again while another store (another process's, in production) watches the changes
//   (`store.changes()`): what publishing them costs, and the changes the watcher read;
// - opening a store holding 100,000 ended runs and resuming nothing.
// Stores are written to a temporary folder and removed. The main thread waits with semaphores: it is
// this tool's own thread.
import CommandDurable
import Dispatch
import Foundation

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let chainLength = arguments.first ?? 1_000
let independentCount = arguments.dropFirst().first ?? 10_000
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("durable-cost-\(getpid())")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
func freshPath() -> String { folder.appendingPathComponent("store-\(UUID().uuidString).sqlite").path }

/// A step's command: its value, sent from another thread (as real work would).
func work(_ value: Int) -> Command<Int> {
    Command<Int> { result in
        DispatchQueue.global().async { result.succeed(value) }
        return nil
    }
}

struct Chain: DurableWorkflow {
    static let name = "cost-chain"
    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
        var previous = flow.step("s0") { _ in work(0) }
        for index in 1..<input { previous = flow.step("s\(index)", after: previous) { _, value in work(value + 1) } }
        return previous
    }
}

struct Independent: DurableWorkflow {
    static let name = "cost-independent"
    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
        let steps = (0..<input).map { index in flow.step("s\(index)") { _ in work(index) } }
        return flow.step("end", waitingFor: steps) { _ in work(input) }
    }
}

func wait<Output>(_ run: Command<Output>) async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        run.execute(on: .immediate) { event in if event.isTerminal { done.resume() } }
    }
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

func durableChain(_ durability: DurableDurability) async throws -> Double {
    let store = try DurableStore(path: freshPath(), durability: durability)
    defer { store.close() }
    try store.register(Chain.self)
    let start = Date()
    let run = try await store.start(Chain.self, id: "chain", input: chainLength)
    await wait(run)
    return Date().timeIntervalSince(start) / Double(chainLength)
}

/// The chain while a second store on the same file reads `changes()`: per step, and the changes read.
func watchedChain(_ durability: DurableDurability) async throws -> (Double, Int) {
    let path = freshPath()
    let store = try DurableStore(path: path, durability: durability)
    defer { store.close() }
    try store.register(Chain.self)
    let watcher = try DurableStore(path: path, durability: durability)
    defer { watcher.close() }
    let changes = watcher.changes()
    let read = Locked(0)
    let reading = Task {
        for await change in changes {
            read.withLock { $0 += 1 }
            if change.kind == .runEnded && change.run == "chain" { break }
        }
    }
    // The store publishes once its look (once a second) found the watcher: short runs until one is read.
    var probe = 0
    while read.withLock({ $0 }) == 0 {
        probe += 1
        await wait(try await store.start(Chain.self, id: "probe-\(probe)", input: 2))
    }
    read.withLock { $0 = 0 }
    let start = Date()
    await wait(try await store.start(Chain.self, id: "chain", input: chainLength))
    let elapsed = Date().timeIntervalSince(start) / Double(chainLength)
    await reading.value
    return (elapsed, read.withLock { $0 })
}

func plainChain() async -> Double {
    let start = Date()
    var previous = work(0)
    var commands = [previous]
    for index in 1..<chainLength {
        let next = work(index)
        next.addDependency(previous)
        commands.append(next)
        previous = next
    }
    await wait(previous)
    return Date().timeIntervalSince(start) / Double(chainLength)
}

func independent(_ durability: DurableDurability) async throws -> (Double, Int) {
    let store = try DurableStore(path: freshPath(), durability: durability)
    defer { store.close() }
    try store.register(Independent.self)
    let before = DurableMeasurements.commits(of: store)
    let start = Date()
    let run = try await store.start(Independent.self, id: "wide", input: independentCount)
    await wait(run)
    let elapsed = Date().timeIntervalSince(start) / Double(independentCount + 1)
    return (elapsed, DurableMeasurements.commits(of: store) - before)
}

func us(_ seconds: Double) -> String { String(format: "%.1f us", seconds * 1e6) }

// DURABLE_COST_PROFILE=1: one `.normal` chain and nothing else (for a profiler: callgrind, perf).
if ProcessInfo.processInfo.environment["DURABLE_COST_PROFILE"] != nil {
    print("one .normal chain of \(chainLength): \(us(try await durableChain(.normal))) per step")
    exit(0)
}
print("durable steps, median of 3; chain \(chainLength), independent \(independentCount)")
if ProcessInfo.processInfo.environment["DURABLE_COST_MEMORY"] != nil {
    let store = try DurableStore.inMemory()
    try store.register(Chain.self)
    let start = Date()
    await wait(try await store.start(Chain.self, id: "memory", input: chainLength))
    print("in memory: chain \(us(Date().timeIntervalSince(start) / Double(chainLength))) per step")
}
for durability in [DurableDurability.full, .normal] {
    var chain: [Double] = [], floor: [Double] = [], wide: [Double] = [], commits: [Double] = []
    for _ in 0..<3 {
        chain.append(try await durableChain(durability))
        floor.append(
            try DurableMeasurements.floor(path: freshPath(), steps: chainLength, durability: durability)
                / Double(chainLength))
        let (perStep, made) = try await independent(durability)
        wide.append(perStep)
        commits.append(Double(made))
    }
    let name = durability == .full ? ".full" : ".normal"
    print(
        "\(name): chain \(us(median(chain))) per step; floor \(us(median(floor))) per step: \(String(format: "%.2fx", median(chain) / median(floor)))"
    )
    print(
        "\(name): \(independentCount) independent steps \(us(median(wide))) per step (\(String(format: "%.2fx", median(wide) / median(chain))) the chain's); \(Int(median(commits))) commits for \(independentCount + 1) steps (\(String(format: "%.0f", Double(independentCount + 1) / median(commits))) steps a commit)"
    )
    var watched: [Double] = [], delivered: [Double] = []
    for _ in 0..<3 {
        let (perStep, read) = try await watchedChain(durability)
        watched.append(perStep)
        delivered.append(Double(read))
    }
    print(
        "\(name): the chain while another store watches its changes \(us(median(watched))) per step (\(String(format: "%.2fx", median(watched) / median(chain))) unwatched); \(Int(median(delivered))) changes read by the watcher for \(chainLength) steps"
    )
    if durability == .normal || durability == .full {
        var plain: [Double] = []
        for _ in 0..<3 { plain.append(await plainChain()) }
        print(
            "\(name): the same command plainly \(us(median(plain))) per step: a durable step adds \(us(median(chain) - median(plain)))"
        )
    }
}

let seeded = freshPath()
try DurableMeasurements.seedEndedRuns(path: seeded, count: 100_000)
var opens: [Double] = []
for _ in 0..<3 {
    let start = Date()
    let store = try DurableStore(path: seeded)
    let report = try await store.resumeUnfinished()
    opens.append(Date().timeIntervalSince(start))
    precondition(report.resumed.isEmpty)
    store.close()
}
print("opening a store of 100,000 ended runs and resuming nothing: \(String(format: "%.1f ms", median(opens) * 1000))")
