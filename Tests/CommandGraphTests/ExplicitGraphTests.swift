import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

private struct Boom: Error {}

/// A command that logs its run and succeeds or fails, from another thread.
private func node(_ name: String, log: Locked<[String]>, fails: Bool = false) -> Command<Int> {
    let command = Command<Int> { result in
        log.withLock { $0.append(name) }
        DispatchQueue.global().async {
            if fails { result.fail(Boom()) } else { result.succeed(1) }
        }
        return nil
    }
    command.name = name
    return command
}

@Suite struct ExplicitGraphTests {
    @Test func graph_runsAsAUnit_reportsEventsOutcomeAndProgress() async throws {
        let log = Locked<[String]>([])
        let graph = Graph()
        let fetch = try graph.add(node("fetch", log: log))
        let parse = try graph.add(node("parse", log: log), dependsOn: [fetch])
        try graph.add(node("save", log: log), dependsOn: [parse], weight: 8)
        let events = Locked<[String]>([])
        let completedEvents = Checkpoint(count: 3)
        try graph.run(on: .immediate) { event in
            events.withLock { $0.append("\(event.name) \(event.state)") }
            if "\(event.state)" == "completed" { completedEvents.fulfill() }
        }
        let outcome = await graph.outcome
        #expect(outcome.succeeded && outcome.completed.count == 3)
        #expect(log.withLock { $0 } == ["fetch", "parse", "save"])
        // The outcome does not wait for `onEvent` (documented): the last event may come just after it.
        #expect(await completedEvents.wait())
        #expect(events.withLock { $0 }.filter { $0.hasSuffix("completed") }.count == 3)
        #expect(ProgressGuard.withLock { graph.progress.totalUnitCount } == 10)
        #expect(graph.fractionCompleted == 1)
        #expect(throws: CommandError.self) { try graph.run() }
        #expect(throws: CommandError.self) { try graph.add(Command<Int>()) }
    }

    @Test func progress_addsUpThroughTheGraph_byWeight() async throws {
        let graph = Graph()
        let halfway = Checkpoint()
        let release = Locked<CommandResult<Int>?>(nil)
        let slow = Command<Int> { result in
            result.reportProgress(completed: 2, of: 4)  // half done
            release.withLock { $0 = result }
            halfway.fulfill()
            return nil
        }
        try graph.add(slow, weight: 3)
        let quick = Command<Int> { result in
            result.succeed(1)
            return nil
        }
        try graph.add(quick, weight: 1)
        try graph.run(on: .immediate)
        #expect(await halfway.wait())
        let done = Checkpoint()
        quick.observeState(on: .immediate) { if $0.isTerminal { done.fulfill() } }
        #expect(await done.wait())
        // quick (weight 1) done, slow (weight 3) half done: (1 + 1.5) / 4.
        #expect(abs(graph.fractionCompleted - 0.625) < 0.001)
        release.withLock { $0 }?.succeed(1)
        _ = await graph.outcome
        #expect(graph.fractionCompleted == 1)
    }

    /// Adding a command twice never traps (`Progress.addChild` would: already the child of another
    /// progress). The second add gives it more edges and nothing else; a different weight, or a
    /// negative one, is refused with a clear error and adds nothing.
    @Test func graph_addingACommandTwice_addsItsEdges_neverTraps() async throws {
        let log = Locked<[String]>([])
        let graph = Graph()
        let a = try graph.add(node("a", log: log))
        let b = try graph.add(node("b", log: log))
        try graph.add(b, dependsOn: [a])
        try graph.add(b)
        #expect(graph.commands.count == 2)
        #expect(b.dependencies.map(\.name) == ["a"])
        #expect(ProgressGuard.withLock { graph.progress.totalUnitCount } == 2)
        #expect {
            try graph.add(b, weight: 3)
        } throws: { error in
            guard let error = error as? CommandError else { return false }
            return error.code == .invalidArgument && error.command == "b" && error.message.contains("weight 1")
        }
        #expect {
            try graph.add(node("c", log: log), weight: -1)
        } throws: { error in
            guard let error = error as? CommandError else { return false }
            return error.code == .invalidArgument && error.command == "c" && error.message.contains("0 or more")
        }
        #expect(graph.commands.count == 2)
        try graph.run(on: .immediate)
        let outcome = await graph.outcome
        #expect(outcome.completed == ["a", "b"])
        #expect(log.withLock { $0 } == ["a", "b"])
        #expect(graph.fractionCompleted == 1)
    }

    /// Weight 0 keeps a command out of the graph's progress; a graph whose weights are all 0 shows
    /// complete once it finished (it stayed at 0 before).
    @Test func graph_zeroWeights_progressCompleteWhenFinished() async throws {
        let log = Locked<[String]>([])
        let graph = Graph()
        let a = try graph.add(node("a", log: log), weight: 0)
        try graph.add(node("b", log: log), dependsOn: [a], weight: 0)
        try graph.run(on: .immediate)
        _ = await graph.outcome
        #expect(graph.fractionCompleted == 1)

        let mixed = Graph()
        let gate = Locked<CommandResult<Int>?>(nil)
        let started = Checkpoint()
        let slow = Command<Int> { result in
            gate.withLock { $0 = result }
            started.fulfill()
            return nil
        }
        try mixed.add(slow, weight: 0)
        let quick = try mixed.add(node("quick", log: log), weight: 2)
        let quickDone = Checkpoint()
        quick.observeState(on: .immediate) { if $0.isTerminal { quickDone.fulfill() } }
        try mixed.run(on: .immediate)
        #expect(await started.wait())
        #expect(await quickDone.wait())
        #expect(mixed.fractionCompleted == 1)  // the weightless command does not hold it back
        gate.withLock { $0 }?.succeed(1)
        _ = await mixed.outcome
        #expect(mixed.fractionCompleted == 1)
    }

    /// `reportProgress` with a total of 0 (an empty batch) used to kill the process (a trap in this
    /// Linux Foundation's progress arithmetic): a total of 0 or less is indeterminate and leaves the
    /// progress as it was; `completed` is clamped; the end completes whatever was reported.
    @Test func reportProgress_emptyBatch_negativeAndOverfullCounts_neverTrap() async throws {
        let graph = Graph()
        let gate = Locked<CommandResult<Int>?>(nil)
        let seen = Locked<[Double]>([])
        let reported = Checkpoint()
        let command = Command<Int> { result in
            result.reportProgress(completed: 0, of: 0)
            seen.withLock { $0.append(result.command.fractionCompleted) }
            result.reportProgress(completed: 5, of: 0)
            seen.withLock { $0.append(result.command.fractionCompleted) }
            result.reportProgress(completed: 1, of: 4)
            seen.withLock { $0.append(result.command.fractionCompleted) }
            result.reportProgress(completed: 1, of: -1)
            seen.withLock { $0.append(result.command.fractionCompleted) }
            result.reportProgress(completed: -3, of: 4)
            seen.withLock { $0.append(result.command.fractionCompleted) }
            result.reportProgress(completed: 7, of: 5)
            seen.withLock { $0.append(result.command.fractionCompleted) }
            result.reportProgress(completed: 1, of: 5)
            gate.withLock { $0 = result }
            reported.fulfill()
            return nil
        }
        try graph.add(command)
        try graph.run(on: .immediate)
        #expect(await reported.wait())
        #expect(seen.withLock { $0 } == [0, 0, 0.25, 0.25, 0, 1])
        gate.withLock { $0 }?.succeed(1)
        _ = await graph.outcome
        #expect(command.fractionCompleted == 1)
        #expect(graph.fractionCompleted == 1)
    }

    @Test func graph_refusesACycle_namingIt() throws {
        let log = Locked<[String]>([])
        let graph = Graph()
        let a = try graph.add(node("a", log: log))
        let b = try graph.add(node("b", log: log), dependsOn: [a])
        let c = try graph.add(node("c", log: log), dependsOn: [b])
        do {
            try graph.add(a, dependsOn: [c])
            Issue.record("no error")
        } catch let error as CommandError {
            #expect(error.code == .dependencyCycle)
            #expect(error.cycle == ["a", "c", "b", "a"])
        }
        #expect(a.dependencies.isEmpty)
    }

    @Test func graph_runsOnlyWhatTheTargetsNeed_andCancelsAsAUnit() async throws {
        let log = Locked<[String]>([])
        let graph = Graph()
        let a = try graph.add(node("a", log: log))
        let b = try graph.add(node("b", log: log), dependsOn: [a])
        try graph.add(node("other", log: log))
        try graph.run(targets: [b], on: .immediate)
        let outcome = await graph.outcome
        #expect(outcome.completed.sorted() == ["a", "b"])
        #expect(!log.withLock { $0 }.contains("other"))

        let never = Command<Int> { result in BlockCancelable { _ = result } }
        never.name = "never"
        let second = Graph()
        try second.add(never)
        try second.add(node("after", log: log), dependsOn: [never])
        try second.run(on: .immediate)
        second.cancel()
        let cancelled = await second.outcome
        #expect(cancelled.cancelled.sorted() == ["after", "never"])
    }

    /// One command in two graphs run at once: each graph is told its end (the first through the
    /// command's one end watch, the second through an observer), and a graph run after the command
    /// ended is told at once.
    @Test func aCommandInTwoGraphs_bothAreToldItsEnd_andALaterGraphToo() async throws {
        let log = Locked<[String]>([])
        let gate = Command<Int> { result in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { result.succeed(1) }
            return nil
        }
        gate.name = "shared"
        let first = Graph(), second = Graph()
        try first.add(gate)
        try first.add(node("a", log: log), dependsOn: [gate])
        try second.add(gate)
        try second.add(node("b", log: log), dependsOn: [gate])
        try first.run(on: .immediate)
        try second.run(on: .immediate)
        let (one, two) = (await first.outcome, await second.outcome)
        #expect(one.completed.sorted() == ["a", "shared"])
        #expect(two.completed.sorted() == ["b", "shared"])
        let third = Graph()
        try third.add(gate)
        try third.run(on: .immediate)
        #expect(await third.outcome.completed == ["shared"])
    }

    @Test func policies_runRegardless_andRunOnFirstSuccess() async throws {
        let log = Locked<[String]>([])
        let failing = node("failing", log: log, fails: true)
        let cleanup = node("cleanup", log: log)
        cleanup.dependencyPolicy = .runRegardless
        cleanup.addDependency(failing)
        guard case .completed = await terminalState(of: cleanup, start: true) else {
            Issue.record("cleanup did not run"); return
        }

        let mirror = node("mirror", log: log, fails: true)
        let primary = node("primary", log: log)
        let first = node("first", log: log)
        first.dependencyPolicy = .runOnFirstSuccess
        first.addDependency(mirror)
        first.addDependency(primary)
        guard case .completed = await terminalState(of: first, start: true) else {
            Issue.record("first did not run"); return
        }

        let none = node("none", log: log)
        none.dependencyPolicy = .runOnFirstSuccess
        none.addDependency(node("down 1", log: log, fails: true))
        none.addDependency(node("down 2", log: log, fails: true))
        guard case .cancelled(let error) = await terminalState(of: none, start: true) else {
            Issue.record("none ran"); return
        }
        #expect(error.code == .dependencyFailed)
        #expect(!log.withLock { $0 }.contains("none"))
    }

    /// Waits for the graph's outcome with a bound; false if it did not finish within `seconds`: 60, as
    /// the other waits of the suite (`Checkpoint`, `eventually`): the whole suite in parallel on 2 cores
    /// left a graph of this file that finishes in milliseconds alone unscheduled for more than 30 s once
    /// (every test of that run took 11 s or more).
    private func finishes(_ graph: Graph, seconds: Double = 60) async -> Bool {
        let done = Checkpoint()
        Task {
            _ = await graph.outcome
            done.fulfill()
        }
        return await done.wait(seconds: seconds)
    }

    /// A target cancelled before the run: its dependency still runs, and the graph finishes.
    @Test func targetCancelledBeforeRun_graphStillFinishes() async throws {
        let log = Locked<[String]>([])
        let graph = Graph()
        let a = try graph.add(node("a", log: log))
        let b = try graph.add(node("b", log: log), dependsOn: [a])
        b.cancel()
        try graph.run(on: .immediate)
        #expect(await finishes(graph))
        #expect(log.withLock { $0 } == ["a"])
        #expect(b.isFinished && b.isCancelled)
    }

    /// Seeded random DAGs with cancels before the run and during it (from another thread): every
    /// graph finishes.
    @Test(.tags(.stress)) func randomDAGs_withCancelsBeforeAndDuringTheRun_finish() async throws {
        let count = StressScale.pick(short: 500, long: 10_000)
        for seed in 0..<UInt64(count) {
            var random = SeededRandom(seed: seed &+ 0xC0FFEE)
            let size = Int.random(in: 1...30, using: &random)
            let log = Locked<[String]>([])
            let graph = Graph()
            var commands: [Command<Int>] = []
            for index in 0..<size {
                let parents =
                    index == 0
                    ? []
                    : (0..<Int.random(in: 0...3, using: &random)).map { _ in Int.random(in: 0..<index, using: &random) }
                commands.append(try graph.add(node("\(index)", log: log), dependsOn: Set(parents).map { commands[$0] }))
            }
            for _ in 0..<Int.random(in: 0...2, using: &random) { commands.randomElement(using: &random)?.cancel() }
            let during = (0..<Int.random(in: 0...2, using: &random)).compactMap { _ in
                commands.randomElement(using: &random)
            }
            try graph.run(on: .immediate)
            for command in during { DispatchQueue.global().async { command.cancel() } }
            #expect(await finishes(graph), "seed \(seed): the graph did not finish")
        }
    }

    /// Seeded random DAGs with an edge closing a cycle (an ancestor made to depend on a descendant)
    /// added from another thread before or during the run: the edge is refused or the cycle fails,
    /// and every graph finishes.
    @Test(.tags(.stress)) func randomDAGs_withACycleClosedBeforeOrDuringTheRun_finish() async throws {
        let count = StressScale.pick(short: 500, long: 10_000)
        for seed in 0..<UInt64(count) {
            var random = SeededRandom(seed: seed &+ 0xC1C1E)
            let size = Int.random(in: 2...30, using: &random)
            let log = Locked<[String]>([])
            let graph = Graph()
            var commands: [Command<Int>] = []
            var parents: [[Int]] = []
            for index in 0..<size {
                let chosen =
                    index == 0
                    ? []
                    : Array(
                        Set(
                            (0...Int.random(in: 0...2, using: &random)).map { _ in
                                Int.random(in: 0..<index, using: &random)
                            }))
                parents.append(chosen)
                commands.append(try graph.add(node("\(index)", log: log), dependsOn: chosen.map { commands[$0] }))
            }
            // A descendant and one of its ancestors, found by walking up from it.
            let descendant = Int.random(in: 1..<size, using: &random)
            var ancestor = descendant
            while let up = parents[ancestor].randomElement(using: &random),
                ancestor == descendant || Bool.random(using: &random)
            {
                ancestor = up
            }
            let (from, to) = (commands[ancestor], commands[descendant])
            if Bool.random(using: &random) {
                from.addDependency(to)
                try graph.run(on: .immediate)
            } else {
                try graph.run(on: .immediate)
                DispatchQueue.global().async { from.addDependency(to) }
            }
            #expect(await finishes(graph), "seed \(seed): the graph did not finish")
        }
    }

    /// Seeded random DAGs: every command runs at most once and only after all its dependencies
    /// completed; nothing runs after a failed dependency; the graph finishes; everything is released.
    @Test(.tags(.stress)) func randomDAGs_keepEveryRule() async throws {
        let count = StressScale.pick(short: 1_000, long: 20_000)
        for _ in 0..<count {
            let seed = UInt64.random(in: 0...UInt64.max)
            var random = SeededRandom(seed: seed)
            let size = Int.random(in: 1...60, using: &random)
            let log = Locked<[String]>([])
            let tracker = LeakTracker()
            var edges: [Int: [Int]] = [:]
            var failing = Set<Int>()
            do {
                let graph = Graph()
                var commands: [Command<Int>] = []
                for index in 0..<size {
                    let fails = Int.random(in: 0..<10, using: &random) == 0
                    if fails { failing.insert(index) }
                    let parents =
                        index == 0
                        ? []
                        : (0..<Int.random(in: 0...3, using: &random)).map { _ in
                            Int.random(in: 0..<index, using: &random)
                        }
                    edges[index] = Array(Set(parents))
                    commands.append(
                        try graph.add(
                            node("\(index)", log: log, fails: fails), dependsOn: edges[index]!.map { commands[$0] }))
                }
                for command in commands { tracker.track(command) }
                try graph.run(on: .immediate)
                _ = await graph.outcome
            }
            let ran = log.withLock { $0 }.compactMap(Int.init)
            #expect(Set(ran).count == ran.count, "seed \(seed): a command ran twice")
            let position = Dictionary(uniqueKeysWithValues: ran.enumerated().map { ($1, $0) })
            // A command must not run if any dependency (transitively) failed.
            var blocked = Set<Int>()
            for index in 0..<size where edges[index]!.contains(where: { failing.contains($0) || blocked.contains($0) })
            {
                blocked.insert(index)
            }
            for index in ran {
                #expect(!blocked.contains(index), "seed \(seed): \(index) ran after a failed dependency")
                for parent in edges[index]! {
                    #expect((position[parent] ?? .max) < position[index]!, "seed \(seed): \(index) before \(parent)")
                }
            }
            #expect(Set(ran) == Set(0..<size).subtracting(blocked), "seed \(seed): a runnable command did not run")
            #expect(await tracker.waitForRelease(seconds: 30) == [], "seed \(seed)")
        }
    }
}

/// `Graph`'s bookkeeping: its completion counted where the commands end (never through the
/// caller's context), edges checked at the call that closes a cycle, and nothing added by a call
/// that throws.
@Suite struct GraphCompletionAndEdgeTests {
    /// A handler on a serial queue the test does not block: every node's events arrive there, in
    /// order per node, and the outcome comes without waiting for them.
    @Test func handlerOnASerialQueue_getsEveryEvent_inOrderPerNode() async throws {
        let queue = DispatchQueue(label: "graph events")
        let log = Locked<[String]>([])
        let graph = Graph()
        let fetch = try graph.add(node("fetch", log: log))
        let parse = try graph.add(node("parse", log: log), dependsOn: [fetch])
        try graph.add(node("save", log: log), dependsOn: [parse])
        let events = Locked<[String: [String]]>([:])
        let allEnded = Checkpoint(count: 3)
        try graph.run(on: .queue(queue)) { event in
            dispatchPrecondition(condition: .onQueue(queue))
            events.withLock { $0[event.name, default: []].append("\(event.state)") }
            if event.state.isTerminal { allEnded.fulfill() }
        }
        let outcome = await graph.outcome
        #expect(outcome.completed == ["fetch", "parse", "save"])
        #expect(await allEnded.wait())
        for name in ["fetch", "parse", "save"] {
            #expect(events.withLock { $0[name] } == ["executing", "completed"], "\(name)")
        }
    }

    @Test func edgeClosingACycle_throwsNamingIt_andAddsNothing() throws {
        let log = Locked<[String]>([])
        let graph = Graph()
        let a = try graph.add(node("a", log: log))
        let b = try graph.add(node("b", log: log), dependsOn: [a])
        let c = try graph.add(node("c", log: log), dependsOn: [b])
        let d = node("d", log: log)
        do {
            try graph.add(a, dependsOn: [d, c])
            Issue.record("the cycle a -> c -> b -> a was accepted")
        } catch let error as CommandError {
            #expect(error.code == .dependencyCycle)
            #expect(error.cycle == ["a", "c", "b", "a"])
        }
        #expect(a.dependencies.isEmpty)
        #expect(graph.commands.count == 3)
        // A new command that closes a cycle is not added either.
        let e = node("e", log: log)
        try b.depend(on: e)
        do {
            try graph.add(e, dependsOn: [c])
            Issue.record("the cycle e -> c -> b -> e was accepted")
        } catch let error as CommandError {
            #expect(error.cycle == ["e", "c", "b", "e"])
        }
        #expect(graph.commands.count == 3)
        #expect(e.dependencies.isEmpty)
    }

    /// Built the README's way at a size where a search per call would take minutes (a whole-graph
    /// search per edge: 50,000 steps of 25,000 on average), then run with the caller's context.
    @Test func longChain_builtWithAddDependsOn_runs() async throws {
        let count = StressScale.pick(short: 50_000, long: 200_000, sanitized: 5_000)
        let graph = Graph()
        var previous: Command<Int>?
        for index in 0..<count {
            let command = Command<Int> { result in
                result.succeed(index)
                return nil
            }
            try graph.add(command, dependsOn: previous.map { [$0] } ?? [])
            previous = command
        }
        try graph.run()
        let outcome = await graph.outcome
        #expect(outcome.completed.count == count)
    }

    /// `progress` made on first read, after the commands were added and after the run: it counts
    /// every command, by weight.
    @Test func progress_madeOnFirstRead_countsEveryCommand() async throws {
        let log = Locked<[String]>([])
        let graph = Graph()
        let a = try graph.add(node("a", log: log), weight: 2)
        try graph.add(node("b", log: log), dependsOn: [a], weight: 3)
        try graph.run(on: .immediate)
        _ = await graph.outcome
        #expect(ProgressGuard.withLock { graph.progress.totalUnitCount } == 5)
        #expect(graph.fractionCompleted == 1)
        let weightless = Graph()
        try weightless.add(node("c", log: log), weight: 0)
        try weightless.run(on: .immediate)
        _ = await weightless.outcome
        #expect(weightless.fractionCompleted == 1)
    }
}
