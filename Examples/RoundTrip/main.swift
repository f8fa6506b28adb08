// swift run -c release RoundTrip [rounds]
//
// A quick, in-process measurement of one execute -> run -> complete -> callback round trip, next to
// its baseline in the same run: a bare BlockOperation on its own OperationQueue plus a DispatchQueue
// hop. Sequential (each round waits for the previous callback) and pipelined (all rounds in flight).
// The main thread waits with a semaphore: it is a command-line tool's own thread, not a pool thread.
// The benchmark package (Benchmarks/) is the place for full statistics; this is the quick check.
import CommandCore
import Dispatch
import Foundation

let rounds = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 20_000
let repeats = 7
let callbackQueue = DispatchQueue(label: "callbacks")

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Bare Operation: its own queue, one BlockOperation, a hop to the callback queue.
func bareSequential() -> Double {
    let done = DispatchSemaphore(value: 0)
    let start = now()
    for _ in 0..<rounds {
        let queue = OperationQueue()
        queue.addOperation(BlockOperation { callbackQueue.async { done.signal() } })
        done.wait()
    }
    return Double(now() - start) / Double(rounds)
}

/// A command: execute -> run on its own queue -> succeed -> value + completed delivered on the queue.
func commandSequential() -> Double {
    let done = DispatchSemaphore(value: 0)
    let start = now()
    for _ in 0..<rounds {
        Command<Int> { result in
            result.succeed(1)
            return nil
        }.execute(on: .queue(callbackQueue)) { event in
            if event.isTerminal { done.signal() }
        }
        done.wait()
    }
    return Double(now() - start) / Double(rounds)
}

func barePipelined() -> Double {
    let group = DispatchGroup()
    let start = now()
    for _ in 0..<rounds {
        group.enter()
        let queue = OperationQueue()
        queue.addOperation(BlockOperation { callbackQueue.async { group.leave() } })
    }
    group.wait()
    return Double(now() - start) / Double(rounds)
}

func commandPipelined() -> Double {
    let group = DispatchGroup()
    let start = now()
    for _ in 0..<rounds {
        group.enter()
        Command<Int> { result in
            result.succeed(1)
            return nil
        }.execute(on: .queue(callbackQueue)) { event in
            if event.isTerminal { group.leave() }
        }
    }
    group.wait()
    return Double(now() - start) / Double(rounds)
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

var results: [String: [Double]] = [:]
_ = bareSequential()
_ = commandSequential()  // warm-up
for _ in 0..<repeats {
    results["bare sequential", default: []].append(bareSequential())
    results["command sequential", default: []].append(commandSequential())
    results["bare pipelined", default: []].append(barePipelined())
    results["command pipelined", default: []].append(commandPipelined())
}
print("rounds: \(rounds), repeats: \(repeats), cores: \(ProcessInfo.processInfo.activeProcessorCount)")
for mode in ["sequential", "pipelined"] {
    let bare = median(results["bare \(mode)"]!)
    let command = median(results["command \(mode)"]!)
    print(
        String(
            format: "%-10@ bare Operation + hop: %7.0f ns   command round trip: %7.0f ns   ratio: %.2fx",
            mode as NSString, bare, command, command / bare))
}
