// swift run -c release GraphScale [max-size] [shape ...]
//
// Graph scaling up to a million commands: chain, fan-out (1 -> N), fan-in (N -> 1) and lattice
// (layers of 10), built with addDependency and run by executing the sinks. Prints time per command
// (build + run) for each size, and the resident memory before, at the peak, and after the graph was
// released. The main thread waits with a semaphore: it is this tool's own thread, not a pool thread.
import CommandCore
import Dispatch
import Foundation

#if canImport(Glibc)
    /// glibc's `malloc_trim`, which the Glibc module does not export.
    @_silgen_name("malloc_trim") func glibcMallocTrim(_ pad: Int) -> Int32

    /// Hands freed memory back to the system, so "after release" measures what is still allocated
    /// rather than what glibc's arenas keep for reuse.
    func trimAllocator() { _ = glibcMallocTrim(0) }
#else
    func trimAllocator() {}
#endif

let maxSize = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 1_000_000
let allShapes = ["chain", "fan-out", "fan-in", "lattice"]
let chosenShapes = Array(CommandLine.arguments.dropFirst(2))
let shapes = chosenShapes.isEmpty ? allShapes : chosenShapes

/// Resident memory in MiB, from /proc (Linux).
func residentMiB(_ field: String = "VmRSS") -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") })
    else { return 0 }
    let kilobytes = Double(line.split(separator: " ").dropFirst().first.map(String.init) ?? "0") ?? 0
    return kilobytes / 1024
}

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
    "shape     commands   us/command (build + run)   release wait (ms)   RSS before   RSS after release and malloc_trim (MiB)"
)
let baseline = residentMiB()
for shape in shapes {
    var size = 1_000
    while size <= maxSize {
        let before = residentMiB()
        let phases = run(shape, size)
        let releaseWait = waitForRelease() / 1000
        trimAllocator()
        let after = residentMiB()
        print(
            String(
                format: "%-8@ %9d   %6.2f (%5.2f + %5.2f)   %17.1f   %10.1f   %10.1f", shape as NSString, size,
                phases.total / 1000, phases.build / 1000, phases.run / 1000, releaseWait, before, after))
        size *= 10
    }
}
print(
    String(
        format: "baseline %.1f MiB, peak (VmHWM) %.1f MiB, now %.1f MiB", baseline, residentMiB("VmHWM"), residentMiB())
)
