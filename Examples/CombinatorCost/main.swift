// swift run -c release CombinatorCost
//
// A quick measurement of the per-value cost of combinators, values pushed synchronously from this
// thread through `.immediate` delivery (no hop): combineLatest of 2, zip of 2, merge of 8, and a
// 1,000-stage map chain. The benchmark package (Benchmarks/) is the place for full statistics.
import CommandGraph
import Dispatch
import Foundation

/// A source whose values this thread pushes once it runs.
final class Pusher<Value: Sendable>: @unchecked Sendable {
    // Written once by the source's run before `started` is signalled, then only read by this thread.
    var result: CommandResult<Value>?
    let started = DispatchSemaphore(value: 0)

    lazy var command: Command<Value> = Command<Value> { [unowned self] result in
        self.result = result
        started.signal()
        return BlockCancelable { _ = result }
    }

    func push(_ value: Value) { result!.send(value) }
}

final class Counter: @unchecked Sendable {
    // Only touched by the pushing thread (deliveries are `.immediate`).
    var count = 0
}

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Runs `output`, waits for the pushers to start, then times `push` over `outputs` expected values.
func measure<Output>(_ name: String, _ output: Command<Output>, pushers: [Pusher<Int>], expected: Int, push: () -> Void)
    -> Double
{
    let counter = Counter()
    output.execute(on: .immediate) { event in if case .value = event { counter.count += 1 } }
    for pusher in pushers { pusher.started.wait() }
    let start = now()
    push()
    let elapsed = Double(now() - start)
    precondition(counter.count == expected, "\(name): \(counter.count) values, expected \(expected)")
    output.cancel()
    return elapsed / Double(expected)
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

let values = 200_000
var results: [String: [Double]] = [:]
for _ in 0..<5 {
    do {
        let a = Pusher<Int>(), b = Pusher<Int>()
        results["combineLatest(2)", default: []].append(
            measure("combineLatest", combineLatest(a.command, b.command), pushers: [a, b], expected: values * 2 - 1) {
                for value in 0..<values {
                    a.push(value)
                    b.push(value)
                }
            })
    }
    do {
        let a = Pusher<Int>(), b = Pusher<Int>()
        results["zip(2), per pair", default: []].append(
            measure("zip", zip(a.command, b.command), pushers: [a, b], expected: values) {
                for value in 0..<values {
                    a.push(value)
                    b.push(value)
                }
            })
    }
    do {
        let pushers = (0..<8).map { _ in Pusher<Int>() }
        results["merge(8)", default: []].append(
            measure("merge", Command.merge(pushers.map(\.command)), pushers: pushers, expected: values) {
                for value in 0..<values { pushers[value % 8].push(value) }
            })
    }
    do {
        let source = Pusher<Int>()
        var node = source.command
        for _ in 0..<1000 { node = node.map { $0 &+ 1 } }
        let perValue = measure("map chain", node, pushers: [source], expected: 2_000) {
            for value in 0..<2_000 { source.push(value) }
        }
        results["map chain (1,000 stages), per value", default: []].append(perValue)
        results["map chain, per value per stage", default: []].append(perValue / 1000)
    }
}
print(
    "values pushed synchronously, .immediate delivery; median of 5 runs; cores: \(ProcessInfo.processInfo.activeProcessorCount)"
)
for name in [
    "combineLatest(2)", "zip(2), per pair", "merge(8)", "map chain (1,000 stages), per value",
    "map chain, per value per stage",
] {
    print(String(format: "%-38@ %10.0f ns", name as NSString, median(results[name]!)))
}
