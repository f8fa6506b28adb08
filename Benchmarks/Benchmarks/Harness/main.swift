// swift run -c release Harness [rounds]   (from Benchmarks/)
//
// A harness for the kept and fused stage, beside the Combinators suite's: a subject pushing 1,000 values synchronously
// through a `map` chain of 100 (or 500) stages, against OpenCombine with `eraseToAnyPublisher()` at
// every stage, the libraries' trials interleaved (ours fused, ours kept, OpenCombine, then again), so
// no library has the caches to itself for a whole run. Each trial is timed in three parts: building
// the chain (making the stages), wiring it (`execute` / `sink`: the fusion happens here), and sending
// the values (what the Combinators suite times, after wiring). Prints per-stage-per-value medians of
// the sends and of the whole trial, and the ratios to OpenCombine.
import CommandGraph
import Dispatch
import OpenCombine

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

struct Trial {
    var build: UInt64 = 0
    var wire: UInt64 = 0
    var send: UInt64 = 0
    var total: UInt64 { build + wire + send }
}

/// Keeps the values alive and observable, so nothing is optimised away.
final class Sink: @unchecked Sendable {
    // Only touched by this thread (every delivery is `.immediate`).
    var sum = 0
}

let values = 1_000

/// `hop`: the callback on a queue, not `.immediate` (what `execute { }` gets on a thread with no
/// context of its own: `.global()`); the trial then waits until the callback saw every value.
func ours(stages: Int, kept: Bool, hop: Bool = false) -> Trial {
    var trial = Trial()
    let sink = Sink()
    var start = now()
    let head = CommandSubject<Int>(replay: .none)
    var node: Command<Int> = head
    var keptStages: [Command<Int>] = []
    for _ in 0..<stages {
        node = node.map { $0 &+ 1 }
        if kept { keptStages.append(node) }
    }
    trial.build = now() - start
    start = now()
    let received = DispatchSemaphore(value: 0)
    let count = Sink()
    node.execute(on: hop ? .queue(.global()) : .immediate) { event in
        guard case .value(let value) = event else { return }
        sink.sum &+= value
        count.sum += 1
        if hop && count.sum == values { received.signal() }
    }
    trial.wire = now() - start
    start = now()
    for value in 0..<values { head.send(value) }
    if hop { received.wait() }
    trial.send = now() - start
    node.cancel()
    precondition(sink.sum > 0 && keptStages.count == (kept ? stages : 0))
    return trial
}

func openCombine(stages: Int) -> Trial {
    var trial = Trial()
    let sink = Sink()
    var start = now()
    let subject = PassthroughSubject<Int, Never>()
    var chain = subject.eraseToAnyPublisher()
    for _ in 0..<stages { chain = chain.map { $0 &+ 1 }.eraseToAnyPublisher() }
    trial.build = now() - start
    start = now()
    let cancellable = chain.sink { sink.sum &+= $0 }
    trial.wire = now() - start
    start = now()
    for value in 0..<values { subject.send(value) }
    trial.send = now() - start
    cancellable.cancel()
    precondition(sink.sum > 0)
    return trial
}

func median(_ samples: [UInt64]) -> Double {
    let sorted = samples.sorted()
    return Double(sorted[sorted.count / 2])
}

let rounds = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 200
print("1,000 values through a map chain; ns per stage per value, medians of \(rounds) interleaved trials")
print("stages  library             build+wire (us)   sends   whole trial   sends/OC   whole/OC")
for stages in [100, 500] {
    var fused: [Trial] = []
    var kept: [Trial] = []
    var peer: [Trial] = []
    var hopped: [Trial] = []
    for round in 0..<(rounds + 10) {
        let trials = (
            ours(stages: stages, kept: false), ours(stages: stages, kept: true), openCombine(stages: stages),
            ours(stages: stages, kept: false, hop: true)
        )
        // The first rounds warm the caches and the allocator up: not counted.
        if round < 10 { continue }
        fused.append(trials.0)
        kept.append(trials.1)
        peer.append(trials.2)
        hopped.append(trials.3)
    }
    let perValue = Double(stages * values)
    let peerSend = median(peer.map(\.send)) / perValue
    let peerWhole = median(peer.map(\.total)) / perValue
    let rows = [
        ("AwesomeCommand fused", fused), ("AwesomeCommand kept", kept), ("fused, callback hop", hopped),
        ("OpenCombine erased", peer),
    ]
    for (name, samples) in rows {
        let setup = median(samples.map { $0.build + $0.wire }) / 1000
        let send = median(samples.map(\.send)) / perValue
        let whole = median(samples.map(\.total)) / perValue
        print(
            "\(stages)".padding(toLength: 8, withPad: " ", startingAt: 0)
                + name.padding(toLength: 20, withPad: " ", startingAt: 0)
                + String(
                    format: "%15.1f %7.1f %13.1f %10.2fx %9.2fx", setup, send, whole, send / peerSend, whole / peerWhole
                ))
    }
}
