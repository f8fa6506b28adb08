// swift run -c release GraphScale [max-size] [shape ...]
//
// Graph scaling up to a million commands: chain, fan-out (1 -> N), fan-in (N -> 1) and lattice
// (layers of 10), built with addDependency and run by executing the sinks. Each size runs several
// times (5 up to 100k, 3 at 1M; this machine is noisy): prints the median time per command (build +
// run, with the run of that median split out), the fastest, the time the release of the graph took
// after the sink's callback, and the resident memory before and after the graph was released; then
// for each shape the ratio of the median at the largest size to the median at 1k. The main thread waits with a semaphore: it is this tool's own thread, not a pool thread.
import CommandCore
import Dispatch
import ExampleSupport
import Foundation

let maxSize = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 1_000_000
let allShapes = ["chain", "fan-out", "fan-in", "lattice"]
let chosenShapes = Array(CommandLine.arguments.dropFirst(2))
let shapes = chosenShapes.isEmpty ? allShapes : chosenShapes

func command() -> Command<Void> {
    Command<Void> { result in
        result.succeed()
        return nil
    }
}

/// Waits until every command of the last graph was deinitialised: the sink's callback runs before
/// the thread that ran the sink drops the last reference and releases the graph. Returns the
/// microseconds waited (polled every 100 us; this tool's own main thread, not a pool thread).
func waitForRelease() -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    var polls = 0
    while CommandDiagnostics.liveCommands > 0 && polls < 600_000 {
        usleep(100)
        polls += 1
    }
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1000
}

/// Nanoseconds per command: building the graph, then executing it until every sink ended.
struct Phases {
    var build = 0.0
    var run = 0.0
    var total: Double { build + run }
}

func run(_ shape: String, _ count: Int) -> Phases {
    var phases = Phases()
    let start = DispatchTime.now().uptimeNanoseconds
    do {
        let nodes = (0..<count).map { _ in command() }
        var sinks: [Command<Void>]
        switch shape {
        case "chain":
            for index in 1..<count { nodes[index].addDependency(nodes[index - 1]) }
            sinks = [nodes[count - 1]]
        case "fan-out":
            for index in 1..<count { nodes[index].addDependency(nodes[0]) }
            sinks = Array(nodes[1...])
        case "fan-in":
            for index in 0..<(count - 1) { nodes[count - 1].addDependency(nodes[index]) }
            sinks = [nodes[count - 1]]
        default:
            for index in 10..<count {
                let layer = index / 10
                for previous in ((layer - 1) * 10)..<(layer * 10) { nodes[index].addDependency(nodes[previous]) }
            }
            sinks = Array(nodes[(count - 10)...])
        }
        phases.build = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count)
        let done = DispatchSemaphore(value: 0)
        let remaining = Locked(sinks.count)
        for sink in sinks {
            sink.execute(on: .immediate) { event in
                if event.isTerminal,
                    remaining.withLock({ value -> Int in
                        value -= 1
                        return value
                    }) == 0
                {
                    done.signal()
                }
            }
        }
        done.wait()
        sinks = []
    }
    phases.run = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count) - phases.build
    return phases
}

/// A lock for the counter above (the library's own lock is internal to the package).
final class Locked<Value>: @unchecked Sendable {
    // Guarded by `lock`.
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

print(
    "shape     commands   us/command median (build + run)   fastest   release (ms)   RSS before   after release (MiB)"
)
// Warm-up, not measured: fills the queue pools and the allocator, as any process that ran a graph.
_ = run("lattice", 10_000)
_ = waitForRelease()
trimAllocator()
let baseline = residentMiB()
var ratios: [String] = []
for shape in shapes {
    var size = 1_000
    var first = 0.0
    var last = 0.0
    while size <= maxSize {
        let before = residentMiB()
        var samples: [Phases] = []
        var releaseWait = 0.0
        for _ in 0..<(size >= 1_000_000 ? 3 : 5) {
            samples.append(run(shape, size))
            releaseWait = max(releaseWait, waitForRelease() / 1000)
        }
        samples.sort { $0.total < $1.total }
        let median = samples[samples.count / 2]
        trimAllocator()
        let after = residentMiB()
        print(
            String(
                format: "%-8@ %9d   %6.2f (%5.2f + %5.2f)          %7.2f   %12.1f   %10.1f   %10.1f", shape as NSString,
                size, median.total / 1000, median.build / 1000, median.run / 1000, samples[0].total / 1000,
                releaseWait, before, after))
        if size == 1_000 { first = median.total }
        last = median.total
        size *= 10
    }
    ratios.append(String(format: "%@ %.2fx", shape, last / first))
}
print("median at the largest size / median at 1k: " + ratios.joined(separator: ", "))
print(
    String(
        format: "baseline %.1f MiB, peak (VmHWM) %.1f MiB, now %.1f MiB", baseline, residentMiB("VmHWM"), residentMiB())
)
