// swift run -c release ValuePath <case> <values>
//
// One value path, for instruction counts under callgrind (deterministic, unlike wall-clock time here):
// run a case with two value counts and divide the difference by the difference of values (and
// stages), which cancels building and tearing down the graph. Cases: `map100` (a 100-stage map
// chain), `filtermap`, `flatmap` (an inner command per value), `send` (a subject, one `.immediate`
// observer). Values are sent from this thread into a hot `CommandSubject` (replay `.none`) with
// `.immediate` delivery, as in the benchmark package's Combinators suite.
//
//     valgrind --tool=callgrind .build/release/ValuePath map100 10000
//     valgrind --tool=callgrind .build/release/ValuePath map100 30000
import CommandGraph
import Foundation

final class Counter: @unchecked Sendable {
    // Only touched by this thread: every delivery is `.immediate` on the sending thread.
    var count = 0
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let values = Int(arguments[2]) else {
    print("usage: ValuePath map100|filtermap|flatmap|send <values>")
    exit(2)
}

let subject = CommandSubject<Int>(replay: .none)
let output: Command<Int>
let expected: Int
switch arguments[1] {
case "map100":
    var node: Command<Int> = subject
    for _ in 0..<100 { node = node.map { $0 &+ 1 } }
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
case "send":
    output = subject
    expected = values
default:
    print("unknown case \(arguments[1])")
    exit(2)
}

let counter = Counter()
output.execute(on: .immediate) { event in if case .value = event { counter.count += 1 } }
for value in 0..<values { subject.send(value) }
precondition(counter.count == expected, "\(counter.count) values, expected \(expected)")
output.cancel()
print("\(arguments[1]): \(counter.count) values")
