// swift run -c release GraphScale [max-size] [shape ...]   |   swift run -c release GraphScale survey [size]
//
// Graph scaling up to a million commands: chain, fan-out (1 -> N), fan-in (N -> 1), lattice
// (layers of 10) and dag (graph-dag's edges), built with addDependency and run by executing the sinks
// (the commands nothing depends on); and three shapes built the
// README's way, through `Graph.add(_:dependsOn:)` (each edge checked for a cycle) and run with
// `Graph.run`: graph-chain, graph-star (every node on node 0) and graph-dag (each node on 3 earlier
// nodes picked at random, seeded); and operation-dag, graph-dag's edges on plain `BlockOperation`s run by
// a hand-written executor (each enqueued on one shared `OperationQueue` once its dependencies finished):
// how a random DAG's cost grows on Foundation's `Operation` alone, no command. Each size runs several times (31 at 1k, 11 at 10k, 5 at 100k, 3 at
// 1M; this machine is noisy): prints the median time per command (making the commands + adding the edges + the run),
// the fastest, the time the release of the graph took after the sink's callback, and the resident
// memory before and after the graph was released; then for each shape the ratio of the median at the
// largest size to the median at 1k. The main thread waits with a semaphore: it is this tool's own
// thread, not a pool thread (and the graph- shapes call `run()` there without a context of their own:
// the graph's completion must not need that blocked thread).
import CommandCore
import CommandGraph
import Dispatch
import ExampleSupport
import Foundation

let maxSize = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 1_000_000
let allShapes = [
    "chain", "fan-out", "fan-in", "lattice", "dag", "graph-chain", "graph-star", "graph-dag", "operation-dag",
]
let chosenShapes = Array(CommandLine.arguments.dropFirst(2))
let shapes = chosenShapes.isEmpty ? allShapes : chosenShapes

func command() -> Command<Void> {
    Command<Void> { result in
        result.succeed()
        return nil
    }
}

/// Waits until every command of the last graph was deinitialised: the sink's callback runs before
/// the thread that ran the sink drops the last reference and releases the graph. Returns the
/// microseconds waited (polled every 100 us; this tool's own main thread, not a pool thread).
func waitForRelease() -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    var polls = 0
    while CommandDiagnostics.liveCommands > 0 && polls < 600_000 {
        usleep(100)
        polls += 1
    }
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1000
}

/// Nanoseconds per command: building the graph, then executing it until every sink ended.
struct Phases {
    /// Making the commands.
    var create = 0.0
    /// Adding the edges (and, for the graph- shapes, the nodes to the `Graph`).
    var build = 0.0
    var run = 0.0
    var total: Double { create + build + run }
}

/// A shape built with `Graph.add(_:dependsOn:)` and run with `Graph.run`, waited for with
/// `whenFinished` (counted where each command ended, not on this blocked main thread).
func runGraph(_ shape: String, _ count: Int) -> Phases {
    var phases = Phases()
    let start = DispatchTime.now().uptimeNanoseconds
    do {
        let nodes = (0..<count).map { _ in command() }
        phases.create = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count)
        let graph = Graph()
        var random: UInt64 = 0x9E37_79B9_7F4A_7C15
        do {
            try graph.add(nodes[0])
            for index in 1..<count {
                switch shape {
                case "graph-chain":
                    try graph.add(nodes[index], dependsOn: [nodes[index - 1]])
                case "graph-star":
                    try graph.add(nodes[index], dependsOn: [nodes[0]])
                default:
                    var picked: [Operation] = []
                    for _ in 0..<min(3, index) {
                        random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                        picked.append(nodes[Int((random >> 33) % UInt64(index))])
                    }
                    try graph.add(nodes[index], dependsOn: picked)
                }
            }
        } catch {
            fatalError("\(error)")
        }
        phases.build = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count) - phases.create
        let done = DispatchSemaphore(value: 0)
        do { try graph.run() } catch { fatalError("\(error)") }
        graph.whenFinished { _ in done.signal() }
        done.wait()
    }
    phases.run = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count) - phases.build - phases.create
    return phases
}

/// graph-dag's edges on `BlockOperation`s run by the hand-written executor (`HandWrittenGraph`); the
/// main thread waits until every node's block returned.
func runOperations(_ count: Int) -> Phases {
    var phases = Phases()
    let start = DispatchTime.now().uptimeNanoseconds
    do {
        let graph = HandWrittenGraph(count: count)
        phases.create = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count)
        var random: UInt64 = 0x9E37_79B9_7F4A_7C15
        for index in 1..<count {
            for _ in 0..<min(3, index) {
                random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                graph.addEdge(from: Int((random >> 33) % UInt64(index)), to: index)
            }
        }
        phases.build = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count) - phases.create
        graph.run(waitingFor: .all)
    }
    phases.run = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count) - phases.build - phases.create
    return phases
}

func run(_ shape: String, _ count: Int) -> Phases {
    if shape.hasPrefix("graph-") { return runGraph(shape, count) }
    if shape == "operation-dag" { return runOperations(count) }
    var phases = Phases()
    let start = DispatchTime.now().uptimeNanoseconds
    do {
        let nodes = (0..<count).map { _ in command() }
        phases.create = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count)
        var sinks: [Command<Void>]
        switch shape {
        case "chain":
            for index in 1..<count { nodes[index].addDependency(nodes[index - 1]) }
            sinks = [nodes[count - 1]]
        case "fan-out":
            for index in 1..<count { nodes[index].addDependency(nodes[0]) }
            sinks = Array(nodes[1...])
        case "fan-in":
            for index in 0..<(count - 1) { nodes[count - 1].addDependency(nodes[index]) }
            sinks = [nodes[count - 1]]
        case "dag":
            // The graph-dag shape's edges, added with `addDependency` (no `Graph`, no cycle check):
            // the baseline for how a random DAG's cost grows with its size on `Operation` alone.
            var random: UInt64 = 0x9E37_79B9_7F4A_7C15
            var hasDependent = [Bool](repeating: false, count: count)
            for index in 1..<count {
                for _ in 0..<min(3, index) {
                    random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    let picked = Int((random >> 33) % UInt64(index))
                    nodes[index].addDependency(nodes[picked])
                    hasDependent[picked] = true
                }
            }
            sinks = nodes.indices.filter { !hasDependent[$0] }.map { nodes[$0] }
        default:
            for index in 10..<count {
                let layer = index / 10
                for previous in ((layer - 1) * 10)..<(layer * 10) { nodes[index].addDependency(nodes[previous]) }
            }
            sinks = Array(nodes[(count - 10)...])
        }
        phases.build = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count) - phases.create
        let done = DispatchSemaphore(value: 0)
        let remaining = Locked(sinks.count)
        for sink in sinks {
            sink.execute(on: .immediate) { event in
                if event.isTerminal,
                    remaining.withLock({ value -> Int in
                        value -= 1
                        return value
                    }) == 0
                {
                    done.signal()
                }
            }
        }
        done.wait()
        sinks = []
    }
    phases.run = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count) - phases.build - phases.create
    return phases
}

/// A lock for the counter above (the library's own lock is internal to the package).
final class Locked<Value>: @unchecked Sendable {
    // Guarded by `lock`.
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// `GraphScale survey [size]`: each public `Graph` and `GroupCommand` call once on a graph of `size`
/// commands (default 100,000), from this main thread, which then blocks: the time of each call.
func survey(_ count: Int) {
    func time(_ label: String, _ body: () throws -> Void) rethrows {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1_000_000
        print(
            String(
                format: "%-58@ %10.2f ms  %8.3f us a node", label as NSString, elapsed, elapsed * 1000 / Double(count)))
    }
    let nodes = (0..<count).map { _ in command() }
    let graph = Graph()
    do {
        try time("Graph.add(_:dependsOn:) x \(count), chain") {
            try graph.add(nodes[0])
            for index in 1..<count { try graph.add(nodes[index], dependsOn: [nodes[index - 1]]) }
        }
        time("Graph.commands") { blackHole(graph.commands) }
        time("Graph.progress (first read: adopts every command)") { blackHole(graph.progress) }
        time("Graph.stallReport (before the run)") { blackHole(graph.stallReport) }
        let done = DispatchSemaphore(value: 0)
        try time("Graph.run() on the main thread, no handler") { try graph.run() }
        graph.whenFinished { _ in done.signal() }
        time("until whenFinished, main thread blocked on a semaphore") { done.wait() }
        time("Graph.fractionCompleted") { blackHole(graph.fractionCompleted) }
        time("Graph.cancel() after the end") { graph.cancel() }
    } catch {
        fatalError("\(error)")
    }
    let children = (0..<count).map { _ in command() }
    for index in 1..<count { children[index].addDependency(children[index - 1]) }
    let group = GroupCommand(name: "group", children: children)
    let late = (0..<1_000).map { _ in command() }
    let groupDone = DispatchSemaphore(value: 0)
    let adder = Command<Void> { result in
        for child in late { group.add(child: child) }
        result.succeed()
        return nil
    }
    group.add(child: adder)
    group.observeState(on: .immediate) { state in if state.isTerminal { groupDone.signal() } }
    time("GroupCommand of \(count) (a chain) + 1,000 added while it runs, main thread blocked") {
        group.start()
        groupDone.wait()
    }
    let limited = GroupCommand(name: "limited", children: (0..<count).map { _ in command() })
    limited.maxConcurrentChildren = 4
    let limitedDone = DispatchSemaphore(value: 0)
    limited.observeState(on: .immediate) { state in if state.isTerminal { limitedDone.signal() } }
    time("GroupCommand of \(count) independent, maxConcurrentChildren = 4") {
        limited.start()
        limitedDone.wait()
    }
}

@inline(never) func blackHole<T>(_ value: T) { withExtendedLifetime(value) {} }

if CommandLine.arguments.dropFirst().first == "survey" {
    survey(CommandLine.arguments.dropFirst(2).first.flatMap(Int.init) ?? 100_000)
    exit(0)
}

print(
    "shape         commands   us/command median (create + edges + run)   fastest   release (ms)   RSS before   after release (MiB)"
)
// Warm-up, not measured: fills the queue pools and the allocator, as any process that ran a graph.
_ = run("lattice", 10_000)
_ = waitForRelease()
trimAllocator()
let baseline = residentMiB()
var ratios: [String] = []
for shape in shapes {
    var size = 1_000
    var first = 0.0
    var last = 0.0
    while size <= maxSize {
        let before = residentMiB()
        var samples: [Phases] = []
        var releaseWait = 0.0
        // Small sizes take milliseconds, so their median needs more samples to stand still on a busy
        // machine (the 1k median moved by 50% between runs with 5).
        for _ in 0..<(size >= 1_000_000 ? 3 : size >= 100_000 ? 5 : size >= 10_000 ? 11 : 31) {
            samples.append(run(shape, size))
            releaseWait = max(releaseWait, waitForRelease() / 1000)
        }
        samples.sort { $0.total < $1.total }
        let median = samples[samples.count / 2]
        trimAllocator()
        let after = residentMiB()
        print(
            String(
                format: "%-11@ %9d   %6.2f (%5.2f + %5.2f + %5.2f)          %7.2f   %12.1f   %10.1f   %10.1f",
                shape as NSString, size, median.total / 1000, median.create / 1000, median.build / 1000,
                median.run / 1000, samples[0].total / 1000,
                releaseWait, before, after))
        if size == 1_000 { first = median.total }
        last = median.total
        size *= 10
    }
    ratios.append(String(format: "%@ %.2fx", shape, last / first))
}
print("median at the largest size / median at 1k: " + ratios.joined(separator: ", "))
print(
    String(
        format: "baseline %.1f MiB, peak (VmHWM) %.1f MiB, now %.1f MiB", baseline, residentMiB("VmHWM"), residentMiB())
)
