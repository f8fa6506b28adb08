// swift run -c release GroupScale [CHILDREN] [chain]
//
// The cost of a group per child against the same commands run by `Graph`: CHILDREN (default 100,000)
// commands that succeed at once, independent (or, with `chain`, each depending on the one before:
// `addDependency` for the group, `Graph.add(_:dependsOn:)` for the graph), built, run to the end and
// released, five rounds each, alternating; prints the median time per child of each and their ratio.
import CommandGraph
import Dispatch
import Foundation

let count = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 100_000
let chained = CommandLine.arguments.dropFirst(2).first == "chain"

func commands() -> [Command<Int>] {
    (0..<count).map { index in
        let command = Command<Int> { result in
            result.succeed(index)
            return nil
        }
        return command
    }
}

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func viaGraph() async throws -> Double {
    let start = now()
    let graph = Graph()
    var previous: Command<Int>?
    for command in commands() {
        if chained, let previous { try graph.add(command, dependsOn: [previous]) } else { try graph.add(command) }
        previous = command
    }
    try graph.run(on: .immediate)
    let outcome = await graph.outcome
    precondition(outcome.completed.count == count)
    return Double(now() - start) / Double(count)
}

func viaGroup() async -> Double {
    let start = now()
    let children = commands()
    if chained { for index in 1..<children.count { children[index].addDependency(children[index - 1]) } }
    let group = GroupCommand(name: "group", children: children)
    let outcome = try? await group.value
    precondition(outcome?.completed.count == count)
    return Double(now() - start) / Double(count)
}

var graphTimes: [Double] = []
var groupTimes: [Double] = []
for _ in 0..<5 {
    graphTimes.append(try await viaGraph())
    groupTimes.append(await viaGroup())
}
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
let graphMedian = median(graphTimes)
let groupMedian = median(groupTimes)
print(
    String(
        format:
            "%d children\(chained ? " (a chain)" : ""): Graph %.2f us per child, GroupCommand %.2f us per child, ratio %.2f",
        count, graphMedian / 1000, groupMedian / 1000, groupMedian / graphMedian))
