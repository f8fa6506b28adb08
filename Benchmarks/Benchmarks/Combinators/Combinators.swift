// Suite 3: values through combinators, pushed synchronously from the benchmark thread with .immediate
// delivery, against OpenCombine (zip, map chain) and swift-async-algorithms (combineLatest, zip,
// merge). Each iteration pushes 1,000 values (the throughput is values per second).
import AsyncAlgorithms
import Benchmark
import CommandGraph
import Dispatch
import OpenCombine

/// A source whose values the benchmark thread pushes once it runs.
final class Pusher: @unchecked Sendable {
    // Written once by the run before `started` is signalled; then only read by the pushing thread.
    var result: CommandResult<Int>?
    let started = DispatchSemaphore(value: 0)
    lazy var command = Command<Int> { [unowned self] result in
        self.result = result
        started.signal()
        return BlockCancelable { _ = result }
    }
}

/// Executes `output`, waits for the pushers to run; returns the pushers ready to push.
func prepare<Output>(_ output: Command<Output>, _ pushers: [Pusher]) {
    output.execute(on: .immediate) { blackHole($0) }
    for pusher in pushers { pusher.started.wait() }
}

let values = 1_000

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal], maxDuration: .seconds(2))

    Benchmark("combineLatest of 2 (1,000 values)") { benchmark in
        let a = Pusher(), b = Pusher()
        let output = combineLatest(a.command, b.command)
        prepare(output, [a, b])
        benchmark.startMeasurement()
        for value in 0..<(values / 2) {
            a.result!.send(value)
            b.result!.send(value)
        }
        benchmark.stopMeasurement()
        output.cancel()
    }

    Benchmark("zip of 2 (1,000 values)") { benchmark in
        let a = Pusher(), b = Pusher()
        let output = zip(a.command, b.command)
        prepare(output, [a, b])
        benchmark.startMeasurement()
        for value in 0..<(values / 2) {
            a.result!.send(value)
            b.result!.send(value)
        }
        benchmark.stopMeasurement()
        output.cancel()
    }

    Benchmark("merge of 8 (1,000 values)") { benchmark in
        let pushers = (0..<8).map { _ in Pusher() }
        let output = Command.merge(pushers.map(\.command))
        prepare(output, pushers)
        benchmark.startMeasurement()
        for value in 0..<values { pushers[value % 8].result!.send(value) }
        benchmark.stopMeasurement()
        output.cancel()
    }

    Benchmark("map chain of 1,000 stages (10 values)") { benchmark in
        let source = Pusher()
        var node = source.command
        for _ in 0..<1_000 { node = node.map { $0 &+ 1 } }
        prepare(node, [source])
        benchmark.startMeasurement()
        for value in 0..<10 { source.result!.send(value) }
        benchmark.stopMeasurement()
        node.cancel()
    }

    Benchmark("OpenCombine zip of 2 (1,000 values)") { benchmark in
        let a = PassthroughSubject<Int, Never>(), b = PassthroughSubject<Int, Never>()
        let cancellable = a.zip(b).sink { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<(values / 2) {
            a.send(value)
            b.send(value)
        }
        benchmark.stopMeasurement()
        cancellable.cancel()
    }

    Benchmark("OpenCombine map chain of 500 stages (10 values)") { benchmark in
        // 500, not 1,000: OpenCombine's recursive delivery crashes near 580 stages here.
        let subject = PassthroughSubject<Int, Never>()
        var chain = subject.eraseToAnyPublisher()
        for _ in 0..<500 { chain = chain.map { $0 &+ 1 }.eraseToAnyPublisher() }
        let cancellable = chain.sink { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<10 { subject.send(value) }
        benchmark.stopMeasurement()
        cancellable.cancel()
    }

    Benchmark("swift-async-algorithms combineLatest of 2 (1,000 values)") { benchmark in
        let a = AsyncStream<Int> { continuation in
            for value in 0..<(values / 2) { continuation.yield(value) }
            continuation.finish()
        }
        let b = AsyncStream<Int> { continuation in
            for value in 0..<(values / 2) { continuation.yield(value) }
            continuation.finish()
        }
        benchmark.startMeasurement()
        for await pair in AsyncAlgorithms.combineLatest(a, b) { blackHole(pair) }
        benchmark.stopMeasurement()
    }

    Benchmark("swift-async-algorithms zip of 2 (1,000 values)") { benchmark in
        let a = (0..<(values / 2)).async
        let b = (0..<(values / 2)).async
        benchmark.startMeasurement()
        for await pair in AsyncAlgorithms.zip(a, b) { blackHole(pair) }
        benchmark.stopMeasurement()
    }

    Benchmark("swift-async-algorithms merge of 2 (1,000 values)") { benchmark in
        let a = (0..<(values / 2)).async
        let b = (0..<(values / 2)).async
        benchmark.startMeasurement()
        for await value in AsyncAlgorithms.merge(a, b) { blackHole(value) }
        benchmark.stopMeasurement()
    }
}
