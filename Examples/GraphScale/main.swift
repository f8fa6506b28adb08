// swift run -c release GraphScale [max-size]
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

func run(_ shape: String, _ count: Int) -> Double {
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
    return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count)
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

print("shape     commands   us/command   RSS before   RSS after release and malloc_trim (MiB)")
let baseline = residentMiB()
for shape in ["chain", "fan-out", "fan-in", "lattice"] {
    var size = 1_000
    while size <= maxSize {
        let before = residentMiB()
        let perNode = run(shape, size) / 1000
        trimAllocator()
        let after = residentMiB()
        print(String(format: "%-8@ %9d   %10.2f   %10.1f   %10.1f", shape as NSString, size, perNode, before, after))
        size *= 10
    }
}
print(
    String(
        format: "baseline %.1f MiB, peak (VmHWM) %.1f MiB, now %.1f MiB", baseline, residentMiB("VmHWM"), residentMiB())
)
