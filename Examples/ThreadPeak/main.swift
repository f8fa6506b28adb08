// swift run -c release ThreadPeak
//
// Peak thread count while 10,000 commands become ready at once, beside the same shape of plain
// Dispatch work. Shapes: 100 roots ending on timer threads, each making 100 dependents ready
// ("fan-out"); 10,000 roots ending on timer threads, each making one dependent ready ("pairs"); a 10,000-command graph of 100 layers of 100, each command depending on 3 of the
// layer before ("layered"). A sampler thread reads the process's thread count from /proc (Linux)
// every 200 us; each line prints the peak above the count before the run. Target (the Operation
// contract): commands within 2x the plain-Dispatch figure plus 16. Exits non-zero if a command shape
// misses it. The main thread waits with a semaphore: it is this tool's own thread, not a pool thread.
import CommandCore
import Dispatch
import Foundation

/// The process's thread count, from /proc (Linux; 0 elsewhere).
func threadCount() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Threads:") })
    else { return 0 }
    return Int(line.split(separator: "\t").last.map(String.init) ?? "") ?? 0
}

/// A little CPU work, so a node is not free.
@inline(never) func work(_ seed: Int) -> Int {
    var value = seed
    for index in 0..<2_000 { value = value &* 31 &+ index }
    return value
}

/// Runs `body` (which calls its argument once everything ended) and returns the peak thread count
/// above the count before it.
func peakThreads(_ body: (@escaping @Sendable () -> Void) -> Void) -> Int {
    let before = threadCount()
    let peak = Locked(before)
    let stop = Locked(false)
    let sampler = Thread {
        while !stop.withLock({ $0 }) {
            let now = threadCount()
            peak.withLock { $0 = max($0, now) }
            usleep(200)
        }
    }
    sampler.start()
    let done = DispatchSemaphore(value: 0)
    body { done.signal() }
    done.wait()
    stop.withLock { $0 = true }
    return peak.withLock { $0 } - before - 1  // the sampler itself
}

let width = 100

func plainFanOut(roots: Int, width: Int, _ finished: @escaping @Sendable () -> Void) {
    let remaining = Locked(roots * width)
    for root in 0..<roots {
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) {
            for index in 0..<width {
                DispatchQueue.global().async {
                    _ = work(root &* index)
                    if remaining.withLock({
                        $0 -= 1; return $0
                    }) == 0 {
                        finished()
                    }
                }
            }
        }
    }
}

func commandFanOut(roots: Int, width: Int, _ finished: @escaping @Sendable () -> Void) {
    let remaining = Locked(roots * width)
    for root in 0..<roots {
        let source = Command<Void> { result in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { result.succeed() }
            return nil
        }
        for index in 0..<width {
            let dependent = Command<Int> { result in
                result.succeed(work(root &* index))
                return nil
            }
            dependent.addDependency(source)
            dependent.execute(on: .immediate) { event in
                if event.isTerminal,
                    remaining.withLock({
                        $0 -= 1; return $0
                    }) == 0
                {
                    finished()
                }
            }
        }
    }
}

func plainLayered(_ finished: @escaping @Sendable () -> Void) {
    // The same dependency structure, driven by hand with counters on the global queue.
    let layers = 100
    let counters = (0..<(layers * width)).map { $0 < width ? Locked(0) : Locked(3) }
    let remaining = Locked(layers * width)
    @Sendable func run(_ node: Int) {
        DispatchQueue.global().async {
            _ = work(node)
            let layer = node / width
            if layer + 1 < layers {
                let column = node % width
                for offset in [0, 1, 2] {
                    let next = (layer + 1) * width + (column + offset * 7) % width
                    if counters[next].withLock({
                        $0 -= 1; return $0
                    }) == 0 {
                        run(next)
                    }
                }
            }
            if remaining.withLock({
                $0 -= 1; return $0
            }) == 0 {
                finished()
            }
        }
    }
    for node in 0..<width { run(node) }
}

func commandLayered(_ finished: @escaping @Sendable () -> Void) {
    let layers = 100
    var nodes: [Command<Int>] = []
    for node in 0..<(layers * width) {
        nodes.append(
            Command<Int> { result in
                result.succeed(work(node))
                return nil
            })
    }
    for layer in 1..<layers {
        for column in 0..<width {
            // Each command depends on the 3 of the layer before that list it as a dependent above.
            for offset in [0, 1, 2] {
                let previous = (layer - 1) * width + (column - offset * 7 + 7 * width) % width
                nodes[layer * width + column].addDependency(nodes[previous])
            }
        }
    }
    let sinks = nodes.suffix(width)
    let remaining = Locked(sinks.count)
    for sink in sinks {
        sink.execute(on: .immediate) { event in
            if event.isTerminal,
                remaining.withLock({
                    $0 -= 1; return $0
                }) == 0
            {
                finished()
            }
        }
    }
}

let shapes: [String: (@escaping @Sendable () -> Void) -> Void] = [
    "plain-fan-out": { plainFanOut(roots: 100, width: 100, $0) },
    "commands-fan-out": { commandFanOut(roots: 100, width: 100, $0) },
    "plain-pairs": { plainFanOut(roots: 10_000, width: 1, $0) },
    "commands-pairs": { commandFanOut(roots: 10_000, width: 1, $0) },
    "plain-layered": plainLayered, "commands-layered": commandLayered,
]

// A child process measures one shape from a fresh start (idle pool threads of an earlier run would
// hide the peak); the parent runs each shape 3 times and compares.
if let shape = CommandLine.arguments.dropFirst().first, let body = shapes[shape] {
    print(peakThreads(body))
    exit(0)
}

/// The peak of `shape` in a fresh process.
func measure(_ shape: String) -> Int {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = [shape]
    let pipe = Pipe()
    process.standardOutput = pipe
    do { try process.run() } catch { fatalError("ThreadPeak: cannot run itself: \(error)") }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Int(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}

print("cores: \(ProcessInfo.processInfo.activeProcessorCount); peak threads above a fresh process's count, median of 3")
var failed = false
for (name, plain, commands) in [
    ("fan-out 100 x 100", "plain-fan-out", "commands-fan-out"),
    ("10,000 pairs", "plain-pairs", "commands-pairs"),
    ("layered 100 x 100", "plain-layered", "commands-layered"),
] {
    let plainPeak = (0..<3).map { _ in measure(plain) }.sorted()[1]
    let commandPeak = (0..<3).map { _ in measure(commands) }.sorted()[1]
    let bound = 2 * plainPeak + 16
    let verdict = commandPeak <= bound ? "within" : "OVER"
    if commandPeak > bound { failed = true }
    print(
        "\(name): plain Dispatch +\(plainPeak), commands +\(commandPeak) (bound 2 x plain + 16 = \(bound): \(verdict))")
}
exit(failed ? 1 : 0)
