// swift run -c release ValuePath <case> <values>
//
// One value path, for instruction counts under callgrind (deterministic, unlike wall-clock time here):
// run a case with two value counts and divide the difference by the difference of values (and
// stages), which cancels building and tearing down the graph. Cases: `map100` (a 100-stage map
// chain), `filtermap`, `flatmap` (an inner command per value: a completed subject), `flatmapjust` (`Command.just` per value), `send` (a subject, one `.immediate`
// observer), and `chain`: commands, not values (a chain of that many `Command<Void>`s built with
// `addDependency`, run and released: divide by the difference of commands), and `handwritten`: the
// Graph suite's hand-written executor on the same substrate, for the same count. Values are sent from this thread into a hot `CommandSubject` (replay `.none`) with
// `.immediate` delivery, as in the benchmark package's Combinators suite.
//
//     valgrind --tool=callgrind .build/release/ValuePath map100 10000
//     valgrind --tool=callgrind .build/release/ValuePath map100 30000
import CommandGraph
import ExampleSupport
import Foundation

final class Counter: @unchecked Sendable {
    // Only touched by this thread: every delivery is `.immediate` on the sending thread.
    var count = 0
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let values = Int(arguments[2]) else {
    print(
        "usage: ValuePath map100|filtermap|flatmap|flatmapjust|kept100|send|chain|exclusivechain|exclusivefanin|exclusive8fanin|fanin|groupchain|graphchain|handwritten <values>"
    )
    exit(2)
}

if arguments[1] == "handwritten" {
    // The Graph suite's hand-written baseline: BlockOperations with a count of unfinished
    // dependencies each, enqueued on one shared queue only once their dependencies finished.
    let graph = HandWrittenGraph(count: values)
    for index in 1..<values { graph.addEdge(from: index - 1, to: index) }
    graph.run(waitingFor: .node(values - 1))
    print("handwritten: \(values) operations")
    exit(0)
}

if arguments[1] == "exclusivefanin" || arguments[1] == "exclusive8fanin" || arguments[1] == "fanin" {
    // Independent commands each holding the category "x" (or 1 to 3 of 8 categories, chosen by the
    // index, as the Graph suite's), executed through a sink that depends on them all: each waits its
    // turn for its categories (granted on the releasing thread).
    let released = DispatchGroup()
    let names = (0..<8).map { "c\($0)" }
    do {
        let nodes = (0..<values).map { index in
            let command = Command<Void> { result in
                result.succeed()
                return nil
            }
            if arguments[1] == "exclusivefanin" { command.add(condition: MutuallyExclusive(category: "x")) }
            if arguments[1] == "exclusive8fanin" {
                for offset in 0...(index % 3) {
                    command.add(condition: MutuallyExclusive(category: names[(index + offset * 3) % 8]))
                }
            }
            return command
        }
        let sink = Command<Void> { result in
            result.succeed()
            return nil
        }
        for node in nodes { sink.addDependency(node) }
        released.enter()
        sink.onRelease { released.leave() }
        sink.execute(on: .immediate) { _ in }
    }
    released.wait()
    while CommandDiagnostics.liveCommands > 0 { usleep(100) }
    print("\(arguments[1]): \(values) commands")
    exit(0)
}

if arguments[1] == "groupchain" || arguments[1] == "graphchain" {
    // A chain of that many commands run as a group's children (`addDependency` between them), or the
    // same chain in a `Graph` (`Graph.add(_:dependsOn:)`): what a group child pays that a node does not.
    let released = DispatchGroup()
    do {
        let nodes = (0..<values).map { _ in
            Command<Void> { result in
                result.succeed()
                return nil
            }
        }
        released.enter()
        nodes[values - 1].onRelease { released.leave() }
        let finished = DispatchSemaphore(value: 0)
        if arguments[1] == "groupchain" {
            for index in 1..<values { nodes[index].addDependency(nodes[index - 1]) }
            let group = GroupCommand(name: "group", children: nodes)
            group.execute(on: .immediate) { event in if event.isTerminal { finished.signal() } }
            finished.wait()
        } else {
            let graph = Graph()
            try! graph.add(nodes[0])
            for index in 1..<values { try! graph.add(nodes[index], dependsOn: [nodes[index - 1]]) }
            try! graph.run(on: .immediate)
            graph.whenFinished { _ in finished.signal() }
            finished.wait()
        }
    }
    released.wait()
    while CommandDiagnostics.liveCommands > 0 { usleep(100) }
    print("\(arguments[1]): \(values) commands")
    exit(0)
}

if arguments[1] == "chain" || arguments[1] == "exclusivechain" {
    let exclusive = arguments[1] == "exclusivechain"
    // This tool's own main thread waits (a group): not a pool thread. It waits for the first and the
    // last command to be released, not by polling (which would count a varying number of polls).
    let released = DispatchGroup()
    do {
        var last: Command<Void>?
        for index in 0..<values {
            let command = Command<Void> { result in
                result.succeed()
                return nil
            }
            if let last { command.addDependency(last) }
            // `exclusivechain`: each command holds the category "x" while it runs.
            if exclusive { command.add(condition: MutuallyExclusive(category: "x")) }
            if index == 0 || index == values - 1 {
                released.enter()
                command.onRelease { released.leave() }
            }
            last = command
        }
        last!.execute(on: .immediate) { _ in }
    }
    released.wait()
    while CommandDiagnostics.liveCommands > 0 { usleep(100) }
    print("\(arguments[1]): \(values) commands")
    exit(0)
}

let subject = CommandSubject<Int>(replay: .none)
/// The second input of `zip2` and `combinelatest2`, sent to after `subject`.
let second = CommandSubject<Int>(replay: .none)
/// The stages `kept100` keeps alive (so they are not fused).
nonisolated(unsafe) var keptStages: [Command<Int>] = []
let output: Command<Int>
let expected: Int
switch arguments[1] {
case "map100":
    var node: Command<Int> = subject
    for _ in 0..<100 { node = node.map { $0 &+ 1 } }
    output = node
    expected = values
case "kept100":
    // 100 map stages the program keeps (an array of them): none is fused, each is a node.
    var node: Command<Int> = subject
    for _ in 0..<100 {
        node = node.map { $0 &+ 1 }
        keptStages.append(node)
    }
    output = node
    expected = values
case "filtermap":
    output = subject.filter { $0 & 1 == 0 }.map { $0 &* 3 }
    expected = (values + 1) / 2
case "flatmap":
    output = subject.flatMap { value in
        let inner = CommandSubject<Int>(replay: .latest)
        inner.send(value)
        inner.complete()
        return inner
    }
    expected = values
case "flatmapjust":
    output = subject.flatMap { Command.just($0) }
    expected = values
case "send":
    output = subject
    expected = values
case "zip2":
    output = zip(subject, second).map { $0 &+ $1 }
    expected = values
case "combinelatest2":
    output = combineLatest(subject, second).map { $0 &+ $1 }
    expected = 2 * values - 1
default:
    print("unknown case \(arguments[1])")
    exit(2)
}

let counter = Counter()
output.execute(on: .immediate) { event in if case .value = event { counter.count += 1 } }
if arguments[1] == "zip2" || arguments[1] == "combinelatest2" {
    for value in 0..<values {
        subject.send(value)
        second.send(value)
    }
} else {
    for value in 0..<values { subject.send(value) }
}
precondition(counter.count == expected, "\(counter.count) values, expected \(expected)")
output.cancel()
print("\(arguments[1]): \(counter.count) values")
