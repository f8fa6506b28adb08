// Suite 2: graph scaling. Chain, fan-out (1 -> N), fan-in (N -> 1) and lattice (layers x 10) of 1k,
// 10k and 100k commands, built with addDependency and run by executing the last node; against the
// naive design (every operation on one shared OperationQueue, Foundation's addDependency starting
// dependents), capped at 8k nodes where it still finishes in seconds. Time per iteration = one graph.
// Also the README's way of building, `Graph.add(_:dependsOn:)` (every edge checked for a cycle at the
// call), for a chain, a star and a random DAG (3 edges a node), beside the same shapes built with
// `addDependency` (build only: commands made, edges added, everything released). And a chain run as
// a `GroupCommand`'s children beside the same chain in a `Graph` (built, run and released).
import Benchmark
import CommandGraph
import Dispatch
import Foundation

func command() -> Command<Void> {
    Command<Void> { result in
        result.succeed()
        return nil
    }
}

/// A chain of `count` commands as a `GroupCommand`'s children, run to the end and released.
func runGroupChain(_ count: Int) {
    let live = CommandDiagnostics.liveCommands
    do {
        let nodes = (0..<count).map { _ in command() }
        for index in 1..<count { nodes[index].addDependency(nodes[index - 1]) }
        let group = GroupCommand(name: "group", children: nodes)
        let done = DispatchSemaphore(value: 0)
        group.execute(on: .immediate) { event in if event.isTerminal { done.signal() } }
        done.wait()
    }
    while CommandDiagnostics.liveCommands > live { usleep(20) }
}

/// The same chain in a `Graph`, run to the end and released.
func runGraphChain(_ count: Int) {
    let live = CommandDiagnostics.liveCommands
    do {
        let nodes = (0..<count).map { _ in command() }
        let graph = Graph()
        do {
            try graph.add(nodes[0])
            for index in 1..<count { try graph.add(nodes[index], dependsOn: [nodes[index - 1]]) }
            try graph.run(on: .immediate)
        } catch {
            fatalError("\(error)")
        }
        let done = DispatchSemaphore(value: 0)
        graph.whenFinished { _ in done.signal() }
        done.wait()
    }
    while CommandDiagnostics.liveCommands > live { usleep(20) }
}

/// Builds a graph of `count` commands in `shape`; returns the node to execute last.
func build(_ shape: String, _ count: Int) -> (last: Command<Void>, sinks: [Command<Void>]) {
    let nodes = (0..<count).map { _ in command() }
    switch shape {
    case "chain":
        for index in 1..<count { nodes[index].addDependency(nodes[index - 1]) }
        return (nodes[count - 1], [nodes[count - 1]])
    case "fan-out":
        for index in 1..<count { nodes[index].addDependency(nodes[0]) }
        return (nodes[0], Array(nodes[1...]))
    case "fan-in":
        for index in 0..<(count - 1) { nodes[count - 1].addDependency(nodes[index]) }
        return (nodes[count - 1], [nodes[count - 1]])
    default:  // lattice: layers of 10, each node depending on the whole previous layer
        let width = 10
        for index in width..<count {
            let layer = index / width
            for previous in ((layer - 1) * width)..<(layer * width) { nodes[index].addDependency(nodes[previous]) }
        }
        return (nodes[count - 1], Array(nodes[(count - width)...]))
    }
}

/// Runs the graph: executes every sink (a fan-out has many) and waits for all of them, then until
/// every command was released (the naive design's time includes releasing its operations too; the
/// thread that ran the last sink releases the graph after the sink's callback returned).
func run(_ shape: String, _ count: Int) {
    let live = CommandDiagnostics.liveCommands
    do {
        let (_, sinks) = build(shape, count)
        let done = DispatchGroup()
        for sink in sinks {
            done.enter()
            sink.execute(on: .immediate) { event in if event.isTerminal { done.leave() } }
        }
        done.wait()
    }
    while CommandDiagnostics.liveCommands > live { usleep(20) }
}

/// Builds `shape` with `Graph.add(_:dependsOn:)` (`throughGraph`) or `addDependency`: a chain, a
/// star (every node on node 0) or a DAG (each node on 3 earlier nodes picked at random, seeded).
func buildShape(_ shape: String, _ count: Int, throughGraph: Bool) throws {
    let nodes = (0..<count).map { _ in command() }
    let graph = Graph()
    var random: UInt64 = 0x9E37_79B9_7F4A_7C15
    if throughGraph { try graph.add(nodes[0]) }
    for index in 1..<count {
        var dependencies: [Operation]
        switch shape {
        case "chain": dependencies = [nodes[index - 1]]
        case "star": dependencies = [nodes[0]]
        default:
            dependencies = []
            for _ in 0..<min(3, index) {
                random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                dependencies.append(nodes[Int((random >> 33) % UInt64(index))])
            }
        }
        if throughGraph {
            try graph.add(nodes[index], dependsOn: dependencies)
        } else {
            for dependency in dependencies { nodes[index].addDependency(dependency) }
        }
    }
    blackHole(graph)
    blackHole(nodes)
}

/// The naive design: one shared OperationQueue, Foundation's addDependency, everything enqueued.
func runNaive(_ count: Int) {
    let queue = OperationQueue()
    let operations = (0..<count).map { _ in BlockOperation {} }
    for index in 1..<count { operations[index].addDependency(operations[index - 1]) }
    queue.addOperations(operations, waitUntilFinished: true)
}

/// The hand-written baseline of the command chain, on the same substrate: `count` `BlockOperation`s built
/// first, each with a count of unfinished dependencies and its dependents (no Foundation edges), and
/// enqueued on one shared `OperationQueue` only once its dependencies finished: the operation that
/// finishes last decrements its dependents' counts and enqueues those that reach zero. A chain here.
/// Time includes building, running and releasing the operations, as for the engine.
func runHandWritten(_ count: Int) {
    final class Node: @unchecked Sendable {
        // `remaining` is guarded by `lock`; `operation` and `dependents` are set before the run.
        let lock = NSLock()
        var remaining = 0
        var dependents: [Node] = []
        var operation: BlockOperation?
    }
    let queue = OperationQueue()
    let done = DispatchSemaphore(value: 0)
    let nodes = (0..<count).map { _ in Node() }
    for index in 1..<count {
        nodes[index].remaining = 1
        nodes[index - 1].dependents.append(nodes[index])
    }
    for (index, node) in nodes.enumerated() {
        let isLast = index == count - 1
        node.operation = BlockOperation { [unowned node] in
            for dependent in node.dependents {
                dependent.lock.lock()
                dependent.remaining -= 1
                let ready = dependent.remaining == 0
                dependent.lock.unlock()
                if ready, let operation = dependent.operation { queue.addOperation(operation) }
            }
            if isLast { done.signal() }
        }
    }
    queue.addOperation(nodes[0].operation!)
    done.wait()
    for node in nodes { node.operation = nil }
}

/// `count` independent commands that succeed at once, executed through a fan-in sink and released:
/// `categories` 0 (plain), 1 (every command holds "a": they run one at a time) or 8 (each holds 1 to 3
/// of 8 categories, chosen by its index).
func runExclusive(_ count: Int, categories: Int) {
    let live = CommandDiagnostics.liveCommands
    do {
        let names = (0..<8).map { "c\($0)" }
        let nodes = (0..<count).map { index -> Command<Void> in
            let node = command()
            switch categories {
            case 0: break
            case 1: node.add(condition: MutuallyExclusive(category: "a"))
            default:
                for offset in 0...(index % 3) {
                    node.add(condition: MutuallyExclusive(category: names[(index + offset * 3) % 8]))
                }
            }
            return node
        }
        let sink = command()
        for node in nodes { sink.addDependency(node) }
        let done = DispatchSemaphore(value: 0)
        sink.execute(on: .immediate) { event in if event.isTerminal { done.signal() } }
        done.wait()
    }
    while CommandDiagnostics.liveCommands > live { usleep(20) }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .peakMemoryResident], maxDuration: .seconds(5), maxIterations: 20)
    for shape in ["chain", "fan-out", "fan-in", "lattice"] {
        for count in [1_000, 10_000, 100_000] {
            Benchmark("\(shape) \(count)", configuration: .init(maxIterations: count >= 100_000 ? 3 : 20)) { _ in
                run(shape, count)
            }
        }
    }
    for count in [1_000, 10_000, 100_000] {
        for (label, categories) in [("plain", 0), ("exclusive, one category", 1), ("exclusive, 1-3 of 8", 8)] {
            Benchmark(
                "independent \(count), \(label)", configuration: .init(maxIterations: count >= 100_000 ? 3 : 20)
            ) { _ in
                runExclusive(count, categories: categories)
            }
        }
    }
    Benchmark("build: 100,000 edges to older commands (cycle check O(1))", configuration: .init(maxIterations: 5)) {
        _ in
        let nodes = (0..<100_000).map { _ in command() }
        for index in 1..<nodes.count { nodes[index].addDependency(nodes[index - 1]) }
        blackHole(nodes)
    }
    Benchmark(
        "build: 1,000 edges to newer commands along a 1,000 chain (bounded search)",
        configuration: .init(maxIterations: 5)
    ) { _ in
        let nodes = (0..<1_000).map { _ in command() }
        for index in 1..<nodes.count { nodes[index - 1].addDependency(nodes[index]) }
        blackHole(nodes)
    }
    for shape in ["chain", "star", "dag"] {
        for count in [1_000, 10_000, 100_000] {
            let iterations = count >= 100_000 ? 3 : 10
            Benchmark(
                "Graph.add(_:dependsOn:) \(shape) \(count) (build)", configuration: .init(maxIterations: iterations)
            ) {
                _ in
                try buildShape(shape, count, throughGraph: true)
            }
            Benchmark(
                "addDependency \(shape) \(count) (build, baseline)", configuration: .init(maxIterations: iterations)
            ) {
                _ in
                try buildShape(shape, count, throughGraph: false)
            }
        }
    }
    for count in [1_000, 10_000, 100_000] {
        // The commands' target: the engine's chain beside a hand-written executor on the same
        // substrate (build + run + release per node).
        Benchmark(
            "hand-written chain \(count) (enqueue when ready, BlockOperation)",
            configuration: .init(maxIterations: count >= 100_000 ? 3 : 20)
        ) { _ in
            runHandWritten(count)
        }
    }
    for count in [1_000, 10_000, 100_000] {
        // A chain run as a group's children (`addDependency` between them) beside the same chain in a
        // `Graph` (`Graph.add(_:dependsOn:)`): what a group child pays that a graph node does not.
        let iterations = count >= 100_000 ? 3 : 20
        Benchmark("group of a chain \(count)", configuration: .init(maxIterations: iterations)) { _ in
            runGroupChain(count)
        }
        Benchmark("Graph of a chain \(count) (baseline)", configuration: .init(maxIterations: iterations)) { _ in
            runGraphChain(count)
        }
    }
    for count in [1_000, 8_000] {
        // The same sizes side by side: this engine, then the naive design.
        Benchmark("chain \(count) (same size as naive)", configuration: .init(maxIterations: 20)) { _ in
            run("chain", count)
        }
        Benchmark(
            "naive chain \(count) (one shared OperationQueue)",
            configuration: .init(maxDuration: .seconds(30), maxIterations: 3)
        ) { _ in
            runNaive(count)
        }
    }
}
