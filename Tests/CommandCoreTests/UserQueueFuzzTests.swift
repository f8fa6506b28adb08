import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

/// Seeded random DAGs of commands and `BlockOperation`s spread over several user queues of random
/// width, inserted in random order, some queues suspended and resumed, some commands run by the engine
/// (`execute`, or `start()` from another thread), random cancels from other threads. Every graph must
/// end (bounded wait), every operation run at most once and after its dependencies, every operation
/// that nothing cancelled run exactly once, and every command be released afterwards.
///
/// The one rule a graph keeps (documented on `Command`): a command the engine runs never depends on a
/// command that sits in a user's queue (a queue must be the one to start what it holds).
@Suite(.tags(.stress)) struct UserQueueFuzzTests {
    static let graphs = StressScale.pick(short: 2_000, long: 100_000)

    @Test func randomGraphs_overUserQueues_endAndRunEachOnce() async {
        let tracker = LeakTracker()
        for seed in 0..<UInt64(Self.graphs) {
            if let failure = await Self.runGraph(seed: seed, tracker: tracker) {
                Issue.record("seed \(seed): \(failure)")
                return
            }
            if seed % 500 == 499 {
                let alive = await tracker.waitForRelease(seconds: 60)
                #expect(
                    alive.isEmpty, "seed \(seed): commands still alive after their graphs ended: \(alive.prefix(5))")
            }
        }
        let alive = await tracker.waitForRelease(seconds: 60)
        #expect(alive.isEmpty, "commands still alive after their graphs ended: \(alive.prefix(5))")
    }

    private enum Placement: Equatable {
        case engine(viaStart: Bool)
        case queue(Int)
    }

    /// Builds, runs and checks one graph; a description of what went wrong, or nil.
    static func runGraph(seed: UInt64, tracker: LeakTracker) async -> String? {
        var random = SeededRandom(seed: seed &* 0x5851_F42D_4C95_7F2D &+ 7)
        let count = Int.random(in: 2...12, using: &random)
        let queueCount = Int.random(in: 1...3, using: &random)
        let queues = (0..<queueCount).map { _ -> OperationQueue in
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = [1, 2, 4, OperationQueue.defaultMaxConcurrentOperationCount]
                .randomElement(
                    using: &random)!
            queue.isSuspended = Int.random(in: 0..<4, using: &random) == 0
            return queue
        }
        let log = StepLog()
        var kinds: [NodeKind] = []
        var placements: [Placement] = []
        for _ in 0..<count {
            let kind = NodeKind.allCases.randomElement(using: &random)!
            kinds.append(kind)
            if kind != .block && Bool.random(using: &random) {
                placements.append(.engine(viaStart: Bool.random(using: &random)))
            } else {
                placements.append(.queue(Int.random(in: 0..<queueCount, using: &random)))
            }
        }
        let operations = (0..<count).map { makeOperation($0, kinds[$0], log: log) }
        let ended = Checkpoint(count: count)
        for operation in operations { operation.completionBlock = { ended.fulfill() } }
        var dependencies: [[Int]] = Array(repeating: [], count: count)
        for node in 0..<count {
            for dependency in 0..<node where Int.random(in: 0..<3, using: &random) == 0 {
                // A command the engine runs must not depend on a command in a user's queue.
                if case .engine = placements[node], case .queue = placements[dependency], kinds[dependency] != .block {
                    continue
                }
                operations[node].addDependency(operations[dependency])
                dependencies[node].append(dependency)
            }
        }
        for operation in operations { tracker.track(operation) }

        // Insert, execute, start and cancel in a random order; cancels and starts from other threads.
        let cancelled = Locked<Set<Int>>([])
        var steps = Array(0..<count).shuffled(using: &random).map { (node: $0, cancel: false) }
        for _ in 0..<Int.random(in: 0...2, using: &random) {
            let at = Int.random(in: 0...steps.count, using: &random)
            steps.insert((node: Int.random(in: 0..<count, using: &random), cancel: true), at: at)
        }
        let resumeAt = Int.random(in: 0...steps.count, using: &random)
        let actors = DispatchGroup()
        for (index, step) in steps.enumerated() {
            if index == resumeAt { for queue in queues { queue.isSuspended = false } }
            let operation = operations[step.node]
            if step.cancel {
                cancelled.withLock { _ = $0.insert(step.node) }
                DispatchQueue.global().async(group: actors) { operation.cancel() }
                continue
            }
            switch placements[step.node] {
            case .queue(let queue):
                queues[queue].addOperation(operation)
            case .engine(let viaStart):
                if viaStart {
                    DispatchQueue.global().async(group: actors) { operation.start() }
                } else if let command = operation as? Command<Int> {
                    command.execute(on: .immediate) { _ in }
                }
            }
        }
        for queue in queues { queue.isSuspended = false }

        guard await ended.wait(seconds: 60) else {
            let unfinished = operations.indices.filter { !operations[$0].isFinished }
            return "hung: unfinished \(unfinished.map { "n\($0) \(placements[$0]) \(kinds[$0])" })"
        }
        for queue in queues {
            guard await allFinished(queue, seconds: 60) else { return "a user queue did not empty" }
        }
        // Cancels may still be in flight on other threads: wait for them before reading the log.
        await withCheckedContinuation { continuation in actors.notify(queue: .global()) { continuation.resume() } }

        let entries = log.entries
        let targets = cancelled.withLock { $0 }
        // A command is cancelled by a cancelled dependency (its policy); a block operation is not.
        var affected = Set<Int>()
        for node in 0..<count
        where targets.contains(node) || (kinds[node] != .block && dependencies[node].contains(where: affected.contains))
        {
            affected.insert(node)
        }
        for node in 0..<count {
            let runs = entries[node]?.runs ?? 0
            if runs > 1 { return "n\(node) ran \(runs) times" }
            if runs == 0 && !affected.contains(node) {
                return "n\(node) (\(kinds[node]), \(placements[node])) never ran"
            }
            guard runs == 1, let started = entries[node]?.startedAt else { continue }
            for dependency in dependencies[node] where !targets.contains(dependency) {
                let end = entries[dependency]?.endedAt ?? -1
                if end < 0 && !affected.contains(dependency) { return "n\(node) ran but n\(dependency) never did" }
                if end > started { return "n\(node) started before n\(dependency) ended" }
            }
        }
        return nil
    }
}
