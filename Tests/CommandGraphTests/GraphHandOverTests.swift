import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

/// Set while the test's own call to `graph.run()` is on the stack: a command whose `run` sees it
/// ran inside that call, on the caller's thread (a task-local value is not seen on a queue's thread).
private enum InsideGraphRun {
    @TaskLocal static var isOn = false
}

/// Where a command's `run` was called: inside the caller's `graph.run()`, and on which queue.
private struct RunPlace: Sendable {
    let insideGraphRun: Bool
    let onAQueue: Bool
}

private func recordingCommand(_ name: String, _ places: Locked<[String: RunPlace]>) -> Command<Int> {
    let command = Command<Int> { result in
        places.withLock {
            $0[name] = RunPlace(insideGraphRun: InsideGraphRun.isOn, onAQueue: OperationQueue.current != nil)
        }
        result.succeed(1)
        return nil
    }
    command.name = name
    return command
}

/// A `Graph` hands its commands over as every other command is handed over: `graph.run()` returns at
/// once and each `run` is called on the command's queue (never inside `run()` on the caller's thread,
/// which froze an app's main thread for as long as a slow root took), through admission.
@Suite struct GraphHandOverTests {
    @Test func roots_runOnTheirQueues_notInsideGraphRun() async throws {
        let places = Locked<[String: RunPlace]>([:])
        let graph = Graph()
        let root = try graph.add(recordingCommand("root", places))
        let other = try graph.add(recordingCommand("other root", places))
        try graph.add(recordingCommand("dependent", places), dependsOn: [root, other])
        try graph.add(recordingCommand("lone root", places))
        // The README's shape: a trailing closure for the events.
        try InsideGraphRun.$isOn.withValue(true) { try graph.run(on: .immediate) { _ in } }
        let outcome = await graph.outcome
        #expect(outcome.succeeded && outcome.completed.count == 4)
        for (name, place) in places.withLock({ $0 }) {
            #expect(!place.insideGraphRun, "'\(name)' ran inside graph.run()")
            #expect(place.onAQueue, "'\(name)' ran without an OperationQueue")
        }
        #expect(places.withLock { $0.count } == 4)
    }

    @Test func aNodeWhoseDependenciesEndedBeforeRun_runsOnItsQueue() async throws {
        let places = Locked<[String: RunPlace]>([:])
        let early = recordingCommand("early", places)
        #expect("\(await terminalState(of: early, start: true))" == "completed")
        let graph = Graph()
        try graph.add(recordingCommand("late", places), dependsOn: [early])
        try InsideGraphRun.$isOn.withValue(true) { try graph.run() }
        #expect(await graph.outcome.completed == ["late"])
        let late = places.withLock { $0["late"] }
        #expect(late?.insideGraphRun == false)
        #expect(late?.onAQueue == true)
    }

    /// 100,000 independent roots started from one thread: none runs inside `run()`, admission holds the
    /// backlog (at most its slots handed to queues at once), and the runs stay on a few threads: the
    /// distinct threads that ran them stay near the core count (counted from each command's
    /// `timing.threadID`, not from the process, whose other tests run threads of their own meanwhile).
    @Test func aHundredThousandRoots_fromOneThread_stayNearTheCoreCount() async throws {
        let count = 100_000
        let inside = Locked(0)
        let graph = Graph()
        var roots: [Command<Int>] = []
        roots.reserveCapacity(count)
        for index in 0..<count {
            let root = Command<Int> { result in
                if InsideGraphRun.isOn { inside.withLock { $0 += 1 } }
                result.succeed(index)
                return nil
            }
            roots.append(try graph.add(root))
        }
        try InsideGraphRun.$isOn.withValue(true) { try graph.run() }
        let outcome = await graph.outcome
        #expect(outcome.completed.count == count)
        #expect(inside.withLock { $0 } == 0)
        let threads = Set(roots.compactMap(\.timing.threadID)).count
        let cores = ProcessInfo.processInfo.activeProcessorCount
        #expect(threads >= 1 && threads <= 4 * cores + 16, "\(threads) threads ran the roots on \(cores) cores")
    }
}
