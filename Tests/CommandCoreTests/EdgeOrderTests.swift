import CommandTestSupport
import Foundation
import Testing

@testable import CommandCore

/// The cycle check at the edge that closes a cycle (``EdgeOrder``): exact in every build order, the
/// cycle named in order, nothing added by a call that throws, and the labels a topological order of
/// every edge after any sequence of additions.
@Suite struct EdgeOrderTests {
    private func commands(_ count: Int, prefix: String = "c") -> [Command<Void>] {
        (0..<count).map { index in
            let command = Command<Void> { result in
                result.succeed()
                return nil
            }
            command.name = "\(prefix)\(index)"
            return command
        }
    }

    private func label(_ command: Command<Void>) -> Int64 {
        EdgeOrder.lock.withLock { _ in EdgeOrder.label(command.orderWord) }
    }

    /// Whether `from` reaches `to` through the recorded dependencies (the reference answer).
    private func reaches(_ from: Command<Void>, _ to: Command<Void>) -> Bool {
        var seen: Set<ObjectIdentifier> = []
        var stack: [Operation] = [from]
        while let current = stack.popLast() {
            if current === to { return true }
            guard seen.insert(ObjectIdentifier(current)).inserted else { continue }
            stack += current.dependencies
        }
        return false
    }

    private func assertOrdered(_ nodes: [Command<Void>], sourceLocation: SourceLocation = #_sourceLocation) {
        for node in nodes {
            for case let dependency as Command<Void> in node.dependencies {
                #expect(
                    label(dependency) < label(node), "\(dependency.name!) -> \(node.name!)",
                    sourceLocation: sourceLocation)
            }
        }
    }

    /// Random edges among 40 commands, in random order, made in random order: `depend(on:)` throws
    /// exactly when the reference search finds a path back, and the cycle it names is made of edges
    /// that exist, in order.
    @Test func randomEdges_throwExactlyWhenACycleWouldClose() throws {
        var random = SeededRandom(seed: 27)
        // Synchronous and CPU-bound: small under the sanitizers, where it would hold a thread of the
        // concurrency pool long enough to starve other suites' waits.
        for round in 0..<StressScale.pick(short: 20, long: 100, sanitized: 3) {
            let nodes = commands(40, prefix: "r\(round)-").shuffled(using: &random)
            var refused = 0
            for _ in 0..<160 {
                let dependent = nodes.randomElement(using: &random)!
                let dependency = nodes.randomElement(using: &random)!
                if dependent === dependency { continue }
                let closes = reaches(dependency, dependent)
                do {
                    try dependent.depend(on: dependency)
                    #expect(!closes, "\(dependent.name!) -> \(dependency.name!) closes a cycle but was added")
                } catch let error as CommandError {
                    refused += 1
                    #expect(closes, "\(dependent.name!) -> \(dependency.name!) was refused: \(error.message)")
                    #expect(error.code == .dependencyCycle)
                    #expect(error.command == dependent.name)
                    let cycle = error.cycle
                    #expect(cycle.first == dependent.name && cycle.last == dependent.name)
                    #expect(cycle.count >= 3 && cycle[1] == dependency.name)
                    // Each name waits for the next: a path of existing edges (the last one new).
                    for (waiter, awaited) in zip(cycle.dropLast(2), cycle.dropFirst().dropLast()) {
                        let node = nodes.first { $0.name == waiter }!
                        let target = nodes.first { $0.name == awaited }!
                        if waiter == dependent.name {
                            #expect(awaited == dependency.name)
                        } else {
                            #expect(node.dependencies.contains { $0 === target }, "\(waiter) -> \(awaited)")
                        }
                    }
                    #expect(!dependent.dependencies.contains { $0 === dependency })
                }
            }
            #expect(refused > 0, "round \(round) closed no cycle: the test checks nothing")
            assertOrdered(nodes)
        }
    }

    /// Labels far apart and unevenly spaced, as when other threads make commands between these (a
    /// member of a move that stays low once pushed the next ones below their own dependencies): the
    /// order holds after every edge, and every refusal is a real cycle.
    @Test func unevenLabels_stayOrderedAfterEveryEdge() throws {
        for gapSeed in UInt64(0)..<UInt64(StressScale.pick(short: 12, long: 200, sanitized: 2)) {
            var gaps = SeededRandom(seed: gapSeed)
            var random = SeededRandom(seed: 27)
            var next: Int64 = 1 << 30
            for round in 0..<8 {
                let made = commands(40, prefix: "g\(gapSeed)-\(round)-")
                for command in made {
                    next += Int64.random(in: 1...(gapSeed % 2 == 0 ? 3 : 5_000), using: &gaps) * EdgeOrder.step
                    let fixed = next
                    EdgeOrder.lock.withLock { _ in
                        command.orderWord = EdgeOrder.word(label: fixed, hasDependents: false)
                    }
                }
                let nodes = made.shuffled(using: &random)
                for _ in 0..<160 {
                    let dependent = nodes.randomElement(using: &random)!
                    let dependency = nodes.randomElement(using: &random)!
                    if dependent === dependency { continue }
                    let closes = reaches(dependency, dependent)
                    let added = (try? dependent.depend(on: dependency)) != nil
                    #expect(added != closes, "\(dependent.name!) -> \(dependency.name!)")
                    assertOrdered(nodes)
                }
            }
        }
    }

    /// With `addDependency`, an edge closing a cycle is recorded (Foundation's rule), and executing
    /// names the cycle; the checks of later edges elsewhere stay exact.
    @Test func addDependency_recordsTheEdgeClosingACycle_andExecutingNamesIt() async throws {
        let nodes = commands(3)
        nodes[1].addDependency(nodes[0])
        nodes[2].addDependency(nodes[1])
        nodes[0].addDependency(nodes[2])  // closes c0 -> c2 -> c1 -> c0
        #expect(nodes[0].dependencies.count == 1)
        let others = commands(3, prefix: "d")
        try others[1].depend(on: others[0])
        try others[2].depend(on: others[1])
        #expect(throws: CommandError.self) { try others[0].depend(on: others[2]) }
        let state = await terminalState(of: nodes[0], start: true)
        guard case .failed(let failure) = state, let error = failure as? CommandError else {
            Issue.record("expected a failure, got \(state)")
            return
        }
        #expect(error.code == .dependencyCycle)
        #expect(error.cycle.count == 4 && error.cycle.first == "c0" && error.cycle.last == "c0")
    }

    /// A graph built from its target back, with commands made in every order: each edge is either
    /// O(1) or bounded, and the closing edge names the whole chain in order.
    @Test func chainBuiltBackwards_namesTheWholeCycle() throws {
        for reversedCreation in [false, true] {
            let made = commands(StressScale.pick(short: 2_000, long: 20_000, sanitized: 300))
            let nodes = reversedCreation ? Array(made.reversed()) : made
            // nodes[i] waits for nodes[i + 1]: built from the end the user starts.
            for index in 0..<(nodes.count - 1) { try nodes[index].depend(on: nodes[index + 1]) }
            assertOrdered(nodes)
            let closing = nodes[nodes.count - 1]
            #expect(throws: CommandError.self) { try closing.depend(on: nodes[0]) }
            do {
                try closing.depend(on: nodes[0])
            } catch let error as CommandError {
                #expect(error.cycle == [closing.name!] + nodes.map { $0.name! })
            }
            #expect(closing.dependencies.isEmpty)
        }
    }

    /// Edges inserted between nodes already ordered, over and over (the gap below a node narrows
    /// until the window must widen): the order stays exact.
    @Test func repeatedInsertions_widenTheWindow_andStayOrdered() throws {
        let nodes = commands(600)
        // A diamond ladder where every new edge goes from an older node to a newer one whose own
        // dependencies sit just below it.
        for index in stride(from: 0, to: nodes.count - 1, by: 1) {
            try nodes[index + 1].depend(on: nodes[index])
        }
        var random = SeededRandom(seed: 9)
        for _ in 0..<StressScale.pick(short: 2_000, long: 10_000, sanitized: 200) {
            let a = Int.random(in: 0..<nodes.count, using: &random)
            let b = Int.random(in: 0..<nodes.count, using: &random)
            guard a != b else { continue }
            let closes = reaches(nodes[b], nodes[a])
            do {
                try nodes[a].depend(on: nodes[b])
                #expect(!closes)
            } catch {
                #expect(closes)
            }
        }
        assertOrdered(nodes)
    }

    /// `depend(on:)` with several operations adds all or none.
    @Test func dependOnSeveral_addsNothingWhenOneClosesACycle() throws {
        let nodes = commands(4)
        try nodes[1].depend(on: nodes[0])
        let plain = BlockOperation {}
        #expect(throws: CommandError.self) { try nodes[0].depend(on: [nodes[2], plain, nodes[1], nodes[3]]) }
        #expect(nodes[0].dependencies.isEmpty)
        #expect(throws: CommandError.self) { try nodes[0].depend(on: [nodes[2], nodes[0]]) }
        #expect(nodes[0].dependencies.isEmpty)
        try nodes[0].depend(on: [nodes[2], plain, nodes[3]])
        #expect(nodes[0].dependencies.count == 3)
        assertOrdered(nodes)
    }

    /// Two threads each adding one half of a two-node cycle, many times: exactly one half is added.
    @Test func concurrentHalvesOfACycle_exactlyOneIsAdded() async {
        for _ in 0..<StressScale.pick(short: 200, long: 2_000, sanitized: 50) {
            let nodes = commands(2)
            async let first: Bool = Task.detached { (try? nodes[0].depend(on: nodes[1])) != nil }.value
            async let second: Bool = Task.detached { (try? nodes[1].depend(on: nodes[0])) != nil }.value
            let (one, two) = await (first, second)
            #expect(one != two)
            #expect(nodes[0].dependencies.count + nodes[1].dependencies.count == 1)
        }
    }
}
