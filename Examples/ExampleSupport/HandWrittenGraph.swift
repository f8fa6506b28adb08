// The hand-written executor the tools measure the engine against (ValuePath's `handwritten`,
// GraphScale's `operation-dag`), on the engine's substrate and nothing else.
import Dispatch
import Foundation

/// A graph of `BlockOperation`s run without Foundation's edges: each node counts its unfinished
/// dependencies (under its own lock) and keeps its dependents; the block of the dependency that
/// finishes last adds the node to one shared `OperationQueue`. No command, no `addDependency`.
///
/// Build it with ``addEdge(from:to:)``, then ``run(waitingFor:)`` once, from a thread of the tool's
/// own (it blocks on a semaphore): the blocks run on the queue's threads; the nodes' operations are
/// released when it returns.
public final class HandWrittenGraph: @unchecked Sendable {
    // `@unchecked Sendable`: `dependents` and `operation` are set before `run`; `remaining` is guarded
    // by its node's lock, `unfinished` by its own.
    private final class Node: @unchecked Sendable {
        let lock = NSLock()
        var remaining = 0
        var dependents: [Node] = []
        var operation: BlockOperation?
    }

    /// What ``run(waitingFor:)`` returns after.
    public enum Finish: Sendable {
        /// The block of the node at this index returned (a chain's last: the cheapest signal).
        case node(Int)
        /// Every node's block returned (counted under a lock).
        case all
    }

    private let nodes: [Node]

    /// `count` nodes, no edges yet.
    public init(count: Int) {
        nodes = (0..<count).map { _ in Node() }
    }

    /// The node at `dependent` runs after the one at `dependency` (an edge added twice counts twice).
    public func addEdge(from dependency: Int, to dependent: Int) {
        nodes[dependency].dependents.append(nodes[dependent])
        nodes[dependent].remaining += 1
    }

    /// Runs the graph from the nodes with no dependency and returns when `finish` happened.
    public func run(waitingFor finish: Finish) {
        let queue = OperationQueue()
        let done = DispatchSemaphore(value: 0)
        let unfinished = NSLock()
        nonisolated(unsafe) var count = nodes.count
        for (index, node) in nodes.enumerated() {
            let signals: Bool
            switch finish {
            case .node(let last): signals = index == last
            case .all: signals = false
            }
            node.operation = BlockOperation { [unowned node] in
                for dependent in node.dependents {
                    dependent.lock.lock()
                    dependent.remaining -= 1
                    let ready = dependent.remaining == 0
                    dependent.lock.unlock()
                    if ready, let operation = dependent.operation { queue.addOperation(operation) }
                }
                if signals { done.signal() }
                if case .all = finish {
                    unfinished.lock()
                    count -= 1
                    let last = count == 0
                    unfinished.unlock()
                    if last { done.signal() }
                }
            }
        }
        // The roots, found before the first runs (a running block makes more nodes ready).
        let roots = nodes.filter { $0.remaining == 0 }
        for root in roots { queue.addOperation(root.operation!) }
        done.wait()
        for node in nodes { node.operation = nil }
    }
}
