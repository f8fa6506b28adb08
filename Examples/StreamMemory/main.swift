// swift run -c release StreamMemory [values]
//
// Endless streams keep memory flat without choosing a replay policy: 10,000,000 values (default)
// through `subject -> map -> filter -> observer`, then through `merge` of 8 subjects, each observed
// `.immediate`ly. Prints the resident size after the first 100,000 values and after the run, and exits
// with status 1 if it grew by more than 10 MiB (a combinator node replays `.latest` by default, the
// sources here replay `.none`; with `.all` on the nodes it would grow by about 16 bytes a value and
// stage). Values are sent from this thread; the observer runs in the send.
import CommandGraph
import ExampleSupport
import Foundation

let total = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 10_000_000
let warmUp = min(100_000, total)

/// Sends `total` values through `send`, measuring the resident size after the warm-up and at the end.
func measure(_ name: String, received: Locked<Int>, _ send: (Int) -> Void) -> Bool {
    for value in 0..<warmUp { send(value) }
    trimAllocator()
    let early = residentMiB()
    let start = DispatchTime.now().uptimeNanoseconds
    for value in warmUp..<total { send(value) }
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    trimAllocator()
    let late = residentMiB()
    let got = received.withLock { $0 }
    let ok = late - early <= 10
    print(
        String(
            format:
                "%@: %d values, %d received, resident %.1f MiB after %d, %.1f MiB after %d (%+.1f MiB), %.0f ns/value%@",
            name, total, got, early, warmUp, late, total, late - early, seconds * 1e9 / Double(max(1, total - warmUp)),
            ok ? "" : "  <-- grew more than 10 MiB"))
    return ok
}

var ok = true
do {
    let subject = CommandSubject<Int>(replay: .none)
    let received = Locked(0)
    let output = subject.map { $0 &* 2 }.filter { $0 % 3 != 0 }
    output.execute(on: .immediate) { event in if event.value != nil { received.withLock { $0 += 1 } } }
    ok = measure("subject -> map -> filter", received: received) { subject.send($0) } && ok
    subject.complete()
}
do {
    let subjects = (0..<8).map { _ in CommandSubject<Int>(replay: .none) }
    let received = Locked(0)
    let output = Command.merge(subjects)
    output.execute(on: .immediate) { event in if event.value != nil { received.withLock { $0 += 1 } } }
    ok = measure("merge of 8", received: received) { subjects[$0 & 7].send($0) } && ok
    for subject in subjects { subject.complete() }
}
exit(ok ? 0 : 1)
