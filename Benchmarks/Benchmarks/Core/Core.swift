// Suite 1: one command, execute -> run -> complete -> callback on a captured queue, next to its
// baselines in the same run: a bare BlockOperation on its own OperationQueue plus a DispatchQueue hop,
// a DispatchGroup hop, and a TaskGroup child task. One round trip per iteration, waited for.
import Benchmark
import CommandGraph
import Dispatch
import Foundation

let callbackQueue = DispatchQueue(label: "callbacks")

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput], scalingFactor: .kilo, maxDuration: .seconds(2))

    Benchmark("Command round trip (execute, run, succeed, callback)") { benchmark in
        for _ in benchmark.scaledIterations {
            let done = DispatchSemaphore(value: 0)
            Command<Int> { result in
                result.succeed(1)
                return nil
            }.execute(on: .queue(callbackQueue)) { event in
                if event.isTerminal { done.signal() }
            }
            done.wait()
        }
    }

    Benchmark("Baseline: BlockOperation on its own OperationQueue + DispatchQueue hop") { benchmark in
        for _ in benchmark.scaledIterations {
            let done = DispatchSemaphore(value: 0)
            let queue = OperationQueue()
            queue.addOperation(BlockOperation { callbackQueue.async { done.signal() } })
            done.wait()
        }
    }

    Benchmark("Baseline: DispatchGroup work + notify on a queue") { benchmark in
        for _ in benchmark.scaledIterations {
            let done = DispatchSemaphore(value: 0)
            let group = DispatchGroup()
            DispatchQueue.global().async(group: group) {}
            group.notify(queue: callbackQueue) { done.signal() }
            done.wait()
        }
    }

    Benchmark("Baseline: TaskGroup child task") { benchmark in
        for _ in benchmark.scaledIterations {
            let value = await withTaskGroup(of: Int.self) { group in
                group.addTask { 1 }
                return await group.next() ?? 0
            }
            blackHole(value)
        }
    }
}
