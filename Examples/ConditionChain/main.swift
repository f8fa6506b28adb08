// swift run -c release ConditionChain [N] [rounds]
//
// A chain of N commands (default 100,000), each depending on the one before, run to its end and
// released: plain, each with one `BlockCondition` that is always true, each with one injection
// (`inject(from:)` of the value before), and each with one `MutuallyExclusive` category of its own.
// For each shape: the median time per command over the rounds (default 5, shapes interleaved), its
// ratio to the plain chain in the same run, and the threads handed over per command (the share of
// commands whose `run` ran on another thread than their dependency's: a command that continues on its
// dependency's lane usually runs on the same thread). The main thread waits with a semaphore: it is
// this tool's own thread, not a pool thread.
import CommandCore
import Dispatch
import Foundation

let count = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 100_000
let rounds = CommandLine.arguments.dropFirst(2).first.flatMap(Int.init) ?? 5

enum Shape: String, CaseIterable {
    case plain
    case condition = "one BlockCondition"
    case injection = "one injection"
    case exclusive = "one MutuallyExclusive category"
}

/// A step of the chain (a subclass: `inject(from:)` hands the body the command as its own type).
// `@unchecked Sendable` as its superclass: no state of its own (the command guards its own).
final class Step: Command<Int>, @unchecked Sendable {}

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Runs one chain of `shape`; returns nanoseconds per command and the share of thread hand-overs.
func run(_ shape: Shape) -> (Double, Double) {
    let start = now()
    var commands: [Step] = []
    commands.reserveCapacity(count)
    for index in 0..<count {
        let command = Step { result in
            result.succeed(index)
            return nil
        }
        if let previous = commands.last {
            switch shape {
            case .injection:
                command.inject(from: previous) { _, _ in }
            default:
                command.addDependency(previous)
            }
        }
        switch shape {
        case .plain, .injection: break
        case .condition: command.add(condition: BlockCondition { true })
        case .exclusive: command.add(condition: MutuallyExclusive(category: "chain \(index)"))
        }
        commands.append(command)
    }
    let done = DispatchSemaphore(value: 0)
    commands.last!.execute(on: .immediate) { event in
        if event.isTerminal { done.signal() }
    }
    done.wait()
    let elapsed = Double(now() - start) / Double(count)
    var hops = 0
    for index in 1..<commands.count
    where commands[index].timing.threadID != commands[index - 1].timing.threadID {
        hops += 1
    }
    for command in commands { precondition("\(command.state)" == "completed", "\(shape): \(command.state)") }
    commands.removeAll()
    return (elapsed, Double(hops) / Double(count - 1))
}

var times: [Shape: [Double]] = [:]
var hopShares: [Shape: [Double]] = [:]
_ = run(.plain)  // warm-up: pools, caches
for _ in 0..<rounds {
    for shape in Shape.allCases {
        let (time, hops) = run(shape)
        times[shape, default: []].append(time)
        hopShares[shape, default: []].append(hops)
    }
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

let plain = median(times[.plain]!)
print("chain of \(count), median of \(rounds) rounds, shapes interleaved")
for shape in Shape.allCases {
    let time = median(times[shape]!)
    print(
        String(
            format: "%@ %7.2f us per command  %5.2fx plain  threads handed over per command %.3f",
            shape.rawValue.padding(toLength: 32, withPad: " ", startingAt: 0), time / 1000, time / plain,
            median(hopShares[shape]!)))
}
