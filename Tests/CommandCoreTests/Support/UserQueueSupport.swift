import CommandTestSupport
import Dispatch
import Foundation

@testable import CommandCore

/// Runs `wait` (a blocking Foundation wait) on a plain `Thread` of its own, as a user's code would,
/// and waits for it to return without blocking the concurrency pool; false if it did not within
/// `seconds`.
func returns(within seconds: Double = 60, _ wait: @escaping @Sendable () -> Void) async -> Bool {
    let done = Checkpoint()
    let thread = Thread {
        wait()
        done.fulfill()
    }
    thread.start()
    return await done.wait(seconds: seconds)
}

/// `queue.waitUntilAllOperationsAreFinished()` returned on a plain thread.
func allFinished(_ queue: OperationQueue, seconds: Double = 60) async -> Bool {
    await returns(within: seconds) { queue.waitUntilAllOperationsAreFinished() }
}

/// `operation.waitUntilFinished()` returned on a plain thread.
func finished(_ operation: Operation, seconds: Double = 60) async -> Bool {
    await returns(within: seconds) { operation.waitUntilFinished() }
}

/// A shared clock of steps, so "ran after its dependencies ended" is checked without timing.
final class StepLog: Sendable {
    struct Entry: Sendable {
        var runs = 0
        var startedAt = -1
        var endedAt = -1
        var queue: ObjectIdentifier?
    }
    // Guards the clock and the entries.
    private let state = Locked<(clock: Int, entries: [Int: Entry])>((0, [:]))

    func started(_ node: Int) {
        let queue = OperationQueue.current.map(ObjectIdentifier.init)
        state.withLock { state in
            state.clock += 1
            state.entries[node, default: Entry()].runs += 1
            state.entries[node, default: Entry()].startedAt = state.clock
            state.entries[node, default: Entry()].queue = queue
        }
    }

    func ended(_ node: Int) {
        state.withLock { state in
            state.clock += 1
            state.entries[node, default: Entry()].endedAt = state.clock
        }
    }

    var entries: [Int: Entry] { state.withLock { $0.entries } }
}

/// A node of a test graph, as a user would write it: a command or a `BlockOperation`.
enum NodeKind: CaseIterable, Sendable {
    /// A command ending inside `run`.
    case commandNow
    /// A command ending later, from another thread.
    case commandLater
    case block
}

/// Makes the operation for node `index` of `kind`, logging to `log`.
func makeOperation(_ index: Int, _ kind: NodeKind, log: StepLog) -> Operation {
    switch kind {
    case .commandNow:
        let command = Command<Int> { result in
            log.started(index)
            log.ended(index)
            result.succeed(index)
            return nil
        }
        command.name = "n\(index)"
        return command
    case .commandLater:
        let command = Command<Int> { result in
            log.started(index)
            DispatchQueue.global().async {
                log.ended(index)
                result.succeed(index)
            }
            return nil
        }
        command.name = "n\(index)"
        return command
    case .block:
        let block = BlockOperation {
            log.started(index)
            log.ended(index)
        }
        block.name = "n\(index)"
        return block
    }
}

/// Small graph shapes, as edges `(dependent, dependency)` over `count` nodes.
struct Shape: Sendable, CustomStringConvertible {
    let name: String
    let count: Int
    let edges: [(Int, Int)]
    var description: String { name }

    static let chain = Shape(name: "chain", count: 4, edges: [(1, 0), (2, 1), (3, 2)])
    static let fanIn = Shape(name: "fan-in", count: 4, edges: [(3, 0), (3, 1), (3, 2)])
    static let fanOut = Shape(name: "fan-out", count: 4, edges: [(1, 0), (2, 0), (3, 0)])
    static let diamond = Shape(name: "diamond", count: 4, edges: [(1, 0), (2, 0), (3, 1), (3, 2)])
    static let all = [chain, fanIn, fanOut, diamond]

    func dependencies(of node: Int) -> [Int] { edges.filter { $0.0 == node }.map(\.1) }
}

/// Every permutation of `0..<count`.
func permutations(_ count: Int) -> [[Int]] {
    if count == 0 { return [[]] }
    var result: [[Int]] = []
    for rest in permutations(count - 1) {
        for index in 0...rest.count {
            var next = rest
            next.insert(count - 1, at: index)
            result.append(next)
        }
    }
    return result
}

/// `addOperations(_:waitUntilFinished: false)`, callable from a test (the method is marked
/// unavailable in asynchronous contexts because of its waiting form).
func add(_ operations: [Operation], to queue: OperationQueue) {
    queue.addOperations(operations, waitUntilFinished: false)
}

extension CommandState {
    var isCancelledState: Bool {
        if case .cancelled = self { return true }
        return false
    }
    var isCompletedState: Bool {
        if case .completed = self { return true }
        return false
    }
}
