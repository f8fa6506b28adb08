// Suite 4: lock contention. Threads (1, 2, 4, 8) each doing 10,000 increments of one counter behind
// Synchronization.Mutex, NSLock, a pthread mutex (what the library uses) or an Atomic add; and many
// threads sending into one command's result sink. This machine has 2 cores and about one core of
// throughput: contention figures here are time slicing; the suite is ready for a many-core host.
import Benchmark
import CommandGraph
import Dispatch
import Foundation
import Synchronization

let increments = 10_000

final class NSLockCounter: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var value = 0
    func add() {
        lock.lock()
        value += 1
        lock.unlock()
    }
}

final class PthreadCounter: @unchecked Sendable {
    // Guarded by `mutex`.
    private var mutex = pthread_mutex_t()
    private var value = 0
    init() { pthread_mutex_init(&mutex, nil) }
    func add() {
        pthread_mutex_lock(&mutex)
        value += 1
        pthread_mutex_unlock(&mutex)
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .throughput], maxDuration: .seconds(2))
    for threads in [1, 2, 4, 8] {
        Benchmark("Mutex, \(threads) threads x 10,000") { _ in
            let counter = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: threads) { _ in
                for _ in 0..<increments { counter.withLock { $0 += 1 } }
            }
        }
        Benchmark("NSLock, \(threads) threads x 10,000") { _ in
            let counter = NSLockCounter()
            DispatchQueue.concurrentPerform(iterations: threads) { _ in
                for _ in 0..<increments { counter.add() }
            }
        }
        Benchmark("pthread_mutex, \(threads) threads x 10,000") { _ in
            let counter = PthreadCounter()
            DispatchQueue.concurrentPerform(iterations: threads) { _ in
                for _ in 0..<increments { counter.add() }
            }
        }
        Benchmark("Atomic add, \(threads) threads x 10,000") { _ in
            let counter = Atomic(0)
            DispatchQueue.concurrentPerform(iterations: threads) { _ in
                for _ in 0..<increments { counter.add(1, ordering: .relaxed) }
            }
        }
        Benchmark("Result sink, \(threads) threads sending 10,000 values each") { benchmark in
            let ready = DispatchSemaphore(value: 0)
            let sink = Mutex<CommandResult<Int>?>(nil)
            let command = Command<Int> { result in
                sink.withLock { $0 = result }
                ready.signal()
                return BlockCancelable { _ = result }
            }
            command.replay = .none
            command.execute(on: .immediate) { blackHole($0) }
            ready.wait()
            let result = sink.withLock { $0 }!
            benchmark.startMeasurement()
            DispatchQueue.concurrentPerform(iterations: threads) { _ in
                for value in 0..<increments { result.send(value) }
            }
            benchmark.stopMeasurement()
            command.cancel()
        }
    }
}
