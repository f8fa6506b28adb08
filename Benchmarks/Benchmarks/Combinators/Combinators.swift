// Suite 3: values through combinators, pushed synchronously from the benchmark thread into hot
// sources (`CommandSubject`, replay `.none`) with `.immediate` delivery, each beside its peer in the
// same run: OpenCombine (map chain, zip, filter+map, flatMap, PassthroughSubject.send) and
// swift-async-algorithms (combineLatest, zip, merge). A graph is wired before `execute` returns, so no
// benchmark waits for wiring. Each iteration pushes the number of values its name says; divide the
// time by values (and stages) for a per-value figure.
import AsyncAlgorithms
import Benchmark
import CommandGraph
import Dispatch
import OpenCombine

let values = 1_000

/// A hot source: what the benchmark thread sends to.
func source() -> CommandSubject<Int> { CommandSubject(replay: .none) }

/// An inner command that has its value already (the closest thing to Combine's `Just`): a subject
/// that sent one value and completed, replaying both to the `flatMap` that subscribes.
func just(_ value: Int) -> Command<Int> {
    let inner = CommandSubject<Int>(replay: .latest)
    inner.send(value)
    inner.complete()
    return inner
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal], maxDuration: .seconds(2))

    // MARK: map chains (per stage per value: time / (stages x values))

    Benchmark("map chain of 100 stages (100 values)") { benchmark in
        let head = source()
        var node: Command<Int> = head
        for _ in 0..<100 { node = node.map { $0 &+ 1 } }
        node.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<100 { head.send(value) }
        benchmark.stopMeasurement()
        node.cancel()
    }

    Benchmark("map chain of 1,000 stages (10 values)") { benchmark in
        let head = source()
        var node: Command<Int> = head
        for _ in 0..<1_000 { node = node.map { $0 &+ 1 } }
        node.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<10 { head.send(value) }
        benchmark.stopMeasurement()
        node.cancel()
    }

    Benchmark("map chain of 100 kept stages (100 values)") { benchmark in
        // The app keeps every stage (an array of them): none is fused, each is a node of its own.
        let head = source()
        var stages: [Command<Int>] = []
        var node: Command<Int> = head
        for _ in 0..<100 {
            node = node.map { $0 &+ 1 }
            stages.append(node)
        }
        node.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<100 { head.send(value) }
        benchmark.stopMeasurement()
        node.cancel()
        blackHole(stages.count)
    }

    Benchmark("map chain of 100 stages (1,000 values)") { benchmark in
        let head = source()
        var node: Command<Int> = head
        for _ in 0..<100 { node = node.map { $0 &+ 1 } }
        node.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<1_000 { head.send(value) }
        benchmark.stopMeasurement()
        node.cancel()
    }

    Benchmark("OpenCombine map chain of 100 stages (1,000 values)") { benchmark in
        let subject = PassthroughSubject<Int, Never>()
        var chain = subject.eraseToAnyPublisher()
        for _ in 0..<100 { chain = chain.map { $0 &+ 1 }.eraseToAnyPublisher() }
        let cancellable = chain.sink { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<1_000 { subject.send(value) }
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

    Benchmark("OpenCombine map chain of 100 stages (100 values)") { benchmark in
        let subject = PassthroughSubject<Int, Never>()
        var chain = subject.eraseToAnyPublisher()
        for _ in 0..<100 { chain = chain.map { $0 &+ 1 }.eraseToAnyPublisher() }
        let cancellable = chain.sink { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<100 { subject.send(value) }
        benchmark.stopMeasurement()
        cancellable.cancel()
    }

    // MARK: one stage

    Benchmark("result sink send, one immediate observer (1,000 values)") { benchmark in
        let subject = source()
        subject.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<values { subject.send(value) }
        benchmark.stopMeasurement()
        subject.cancel()
    }

    Benchmark("OpenCombine PassthroughSubject send, one sink (1,000 values)") { benchmark in
        let subject = PassthroughSubject<Int, Never>()
        let cancellable = subject.sink { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<values { subject.send(value) }
        benchmark.stopMeasurement()
        cancellable.cancel()
    }

    Benchmark("filter+map (1,000 values)") { benchmark in
        let subject = source()
        let output = subject.filter { $0 & 1 == 0 }.map { $0 &* 3 }
        output.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<values { subject.send(value) }
        benchmark.stopMeasurement()
        output.cancel()
    }

    Benchmark("OpenCombine filter+map (1,000 values)") { benchmark in
        let subject = PassthroughSubject<Int, Never>()
        let cancellable = subject.filter { $0 & 1 == 0 }.map { $0 &* 3 }.sink { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<values { subject.send(value) }
        benchmark.stopMeasurement()
        cancellable.cancel()
    }

    Benchmark("flatMap, an inner with its value per value (1,000 values)") { benchmark in
        let subject = source()
        let output = subject.flatMap { just($0) }
        output.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<values { subject.send(value) }
        benchmark.stopMeasurement()
        output.cancel()
    }

    Benchmark("flatMap of Command.just (1,000 values)") { benchmark in
        let subject = source()
        let output = subject.flatMap { Command.just($0) }
        output.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<values { subject.send(value) }
        benchmark.stopMeasurement()
        output.cancel()
    }

    Benchmark("OpenCombine flatMap of Just (1,000 values)") { benchmark in
        let subject = PassthroughSubject<Int, Never>()
        let cancellable = subject.flatMap { Just($0) }.sink { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<values { subject.send(value) }
        benchmark.stopMeasurement()
        cancellable.cancel()
    }

    // MARK: several inputs

    Benchmark("zip of 2 (1,000 values)") { benchmark in
        let a = source(), b = source()
        let output = zip(a, b)
        output.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<(values / 2) {
            a.send(value)
            b.send(value)
        }
        benchmark.stopMeasurement()
        output.cancel()
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

    Benchmark("combineLatest of 2 (1,000 values)") { benchmark in
        let a = source(), b = source()
        let output = combineLatest(a, b)
        output.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<(values / 2) {
            a.send(value)
            b.send(value)
        }
        benchmark.stopMeasurement()
        output.cancel()
    }

    Benchmark("merge of 8 (1,000 values)") { benchmark in
        let inputs = (0..<8).map { _ in source() }
        let output = Command.merge(inputs)
        output.execute(on: .immediate) { blackHole($0) }
        benchmark.startMeasurement()
        for value in 0..<values { inputs[value % 8].send(value) }
        benchmark.stopMeasurement()
        output.cancel()
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

    Benchmark("swift-async-algorithms merge of 8 (1,000 values)") { benchmark in
        // Its merge takes at most 3 sequences: 8 as merge(merge(3), merge(3), merge(2)).
        let parts = (0..<8).map { part in stride(from: part, to: values, by: 8).async }
        let merged = AsyncAlgorithms.merge(
            AsyncAlgorithms.merge(parts[0], parts[1], parts[2]), AsyncAlgorithms.merge(parts[3], parts[4], parts[5]),
            AsyncAlgorithms.merge(parts[6], parts[7]))
        benchmark.startMeasurement()
        for await value in merged { blackHole(value) }
        benchmark.stopMeasurement()
    }
}
