import CommandCore
import Foundation
import Testing

@testable import CommandGraph

/// The graph's index of its nodes: a value type, tested without threads.
@Suite struct NodeIndexTests {
    /// 10,000 nodes appended (the table grows from 16 buckets through 10 doublings): each is found at
    /// its offset, and 1,000 objects never appended are not found.
    @Test func everyAppendedNode_isFoundAtItsOffset_andNoOtherObject() {
        let objects = (0..<10_000).map { _ in NSObject() }
        let strangers = (0..<1_000).map { _ in NSObject() }
        let identity = { (offset: Int) in ObjectIdentifier(objects[offset]) }
        var index = NodeIndex()
        #expect(index.offset(of: ObjectIdentifier(objects[0]), identity: identity) == nil)
        for (offset, object) in objects.enumerated() {
            index.append(ObjectIdentifier(object), identity: identity)
            // The node just added and the first one, found through every growth.
            #expect(index.offset(of: ObjectIdentifier(object), identity: identity) == offset)
            #expect(index.offset(of: ObjectIdentifier(objects[0]), identity: identity) == 0)
        }
        #expect(index.count == 10_000)
        let found = objects.indices.filter { index.offset(of: ObjectIdentifier(objects[$0]), identity: identity) == $0 }
        #expect(found.count == 10_000)
        #expect(strangers.allSatisfy { index.offset(of: ObjectIdentifier($0), identity: identity) == nil })
    }
}

/// A graph large enough for its index to grow many times: weights kept apart, re-adds, targets.
@Suite struct LargeGraphTests {
    @Test func aGraphOfThreeThousandCommands_keepsEachWeight_findsEachNode_andRunsTheTargetsOnly() async throws {
        let graph = Graph()
        var commands: [Command<Int>] = []
        var total: Int64 = 0
        for index in 0..<3_000 {
            let command = Command<Int> { result in
                result.succeed(index)
                return nil
            }
            command.name = "c\(index)"
            let weight = Int64(index % 4)  // 0, 1, 2, 3
            total += weight
            try graph.add(command, dependsOn: index > 0 ? [commands[index - 1]] : [], weight: weight)
            commands.append(command)
        }
        // Added again with the same weight: nothing more; with another: refused, naming the first.
        for index in [0, 1, 2, 1_499, 2_999] {
            try graph.add(commands[index], weight: Int64(index % 4))
            #expect {
                try graph.add(commands[index], weight: 7)
            } throws: { error in
                (error as? CommandError)?.message.contains("weight \(index % 4),") == true
            }
        }
        #expect(graph.commands.count == 3_000)
        #expect(ProgressGuard.withLock { graph.progress.totalUnitCount } == total)
        // The target c1499 needs c0...c1498: 1,500 commands run, the other 1,500 never.
        try graph.run(targets: [commands[1_499]], on: .immediate)
        let outcome = await graph.outcome
        #expect(outcome.completed.count == 1_500)
        #expect(outcome.completed.first == "c0" && outcome.completed.last == "c1499")
        #expect(outcome.failed.isEmpty && outcome.cancelled.isEmpty)
        #expect(!commands[1_500].isExecuting && !commands[1_500].isFinished)
    }
}
