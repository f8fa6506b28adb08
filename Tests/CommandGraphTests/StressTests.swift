import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

/// The checks every execution's observer makes as events arrive.
private final class ExecutionProbe: Sendable {
    private struct State {
        var terminals = 0
        var afterTerminal = 0
        var valuesAfterCancel = 0
        var endedCancelled = false
        var cancelReturnedAt: UInt64?
        var terminalAt: UInt64?
    }

    private let state = Locked(State())
    let done: Checkpoint

    init(done: Checkpoint) { self.done = done }

    func cancelReturned() { state.withLock { $0.cancelReturnedAt = DispatchTime.now().uptimeNanoseconds } }

    func record<Output>(_ event: CommandEvent<Output>) {
        let first = state.withLock { state -> Bool in
            if state.terminals > 0 { state.afterTerminal += 1 }
            if case .value = event, state.cancelReturnedAt != nil { state.valuesAfterCancel += 1 }
            guard event.isTerminal else { return false }
            if case .cancelled = event { state.endedCancelled = true }
            state.terminals += 1
            if state.terminals == 1 { state.terminalAt = DispatchTime.now().uptimeNanoseconds }
            return state.terminals == 1
        }
        if first { done.fulfill() }
    }

    /// Events after the terminal one, a terminal count other than one, and values delivered after a
    /// `cancel()` that took effect had returned beyond the one the contract allows: these cancels come
    /// from other threads, where a delivery that had claimed its value just before the cancel may still
    /// run after `cancel()` returned, at most one value per observer (README, "Cancel"; the Cancellation
    /// article). The probe sees when the callback runs, not when its value was claimed, so one such
    /// value is the contract, two are a violation. (A cancel after completion is a no-op: values
    /// already sent are still delivered.)
    var violations: Int {
        state.withLock {
            $0.afterTerminal + ($0.endedCancelled ? max(0, $0.valuesAfterCancel - 1) : 0)
                + ($0.terminals == 1 ? 0 : 1)
        }
    }

    /// Values whose callbacks started after a cancel from another thread had returned (each within
    /// the contract's one in-flight value), for the summary line.
    var inFlightAfterCancel: Int { state.withLock { $0.endedCancelled ? min(1, $0.valuesAfterCancel) : 0 } }

    /// What the violations were, for the failure message.
    var report: String {
        state.withLock {
            "afterTerminal \($0.afterTerminal), terminals \($0.terminals), valuesAfterCancel \($0.valuesAfterCancel), endedCancelled \($0.endedCancelled)"
        }
    }

    /// Nanoseconds from `cancel()` returning to the terminal event, when cancel came first.
    var cancelLatency: UInt64? {
        state.withLock { state in
            guard let cancelled = state.cancelReturnedAt, let ended = state.terminalAt, ended > cancelled else {
                return nil
            }
            return ended - cancelled
        }
    }
}

@Suite(.tags(.stress)) struct StressTests {
    /// Executions whose run completes synchronously, asynchronously, twice, or never, cancelled from
    /// other threads at random points (before execute, right after, during the run, after the end).
    @Test func executions_withCancelAtRandomPoints_endExactlyOnce() async {
        let total = StressScale.pick(short: 20_000, long: 1_000_000)
        let batch = 1_000
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededRandom(seed: seed)
        let delivery = DispatchQueue(label: "stress.delivery", attributes: .concurrent)
        var violations = 0
        var inFlight = 0
        var longestCancelLatency: UInt64 = 0
        let started = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<(total / batch) {
            let done = Checkpoint(count: batch)
            var probes: [ExecutionProbe] = []
            var commands: [Command<Int>] = []
            for _ in 0..<batch {
                let mode = Int.random(in: 0..<4, using: &random)
                let drawn = Int.random(in: 0..<5, using: &random)
                let cancelPoint = mode == 3 && drawn >= 3 ? 2 : drawn  // a never-ending run must be cancelled
                let values = Int.random(in: 0..<4, using: &random)
                let probe = ExecutionProbe(done: done)
                let command = Command<Int> { result in
                    let work: @Sendable () -> Void = {
                        for value in 0..<values { result.send(value) }
                        result.complete()
                        if mode == 2 {
                            result.complete()
                            result.send(99)
                        }
                    }
                    switch mode {
                    case 0, 2: work()
                    case 1: DispatchQueue.global().async(execute: work)
                    default: break
                    }
                    if cancelPoint == 2 {
                        DispatchQueue.global().async {
                            result.command.cancel()
                            probe.cancelReturned()
                        }
                    }
                    return mode == 3 ? BlockCancelable { _ = result } : nil
                }
                if cancelPoint == 0 {
                    command.cancel()
                    probe.cancelReturned()
                }
                command.execute(on: .queue(delivery)) { event in
                    probe.record(event)
                    if cancelPoint == 3, event.isTerminal {
                        command.cancel()  // after the end: a no-op
                    }
                }
                if cancelPoint == 1 {
                    DispatchQueue.global().async {
                        command.cancel()
                        probe.cancelReturned()
                    }
                }
                probes.append(probe)
                commands.append(command)
            }
            let finished = await done.wait(seconds: 120)
            if !finished {
                let stalled = commands.filter { !$0.state.isTerminal }.prefix(5).map {
                    "\($0.displayName): \($0.state)"
                }
                Issue.record("seed \(seed): executions stalled, e.g. \(stalled)")
                return
            }
            violations += probes.reduce(0) { $0 + $1.violations }
            inFlight += probes.reduce(0) { $0 + $1.inFlightAfterCancel }
            for probe in probes where probe.violations > 0 { Issue.record("seed \(seed): \(probe.report)") }
            longestCancelLatency = max(longestCancelLatency, probes.compactMap(\.cancelLatency).max() ?? 0)
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        print(
            "stress: \(total) executions in \(String(format: "%.1f", elapsed)) s, longest cancel-to-terminal \(longestCancelLatency / 1000) us, "
                + "\(inFlight) in-flight values after a cancel (allowed: one per observer), seed \(seed)"
        )
        #expect(violations == 0, "seed \(seed)")
    }

    @Test func wideFanIns_andDeepChains_finish() async throws {
        let width = StressScale.pick(short: 1_000, long: 20_000)
        let sources = (0..<width).map { index in
            Command<Int> { result in
                DispatchQueue.global().async { result.succeed(index) }
                return nil
            }
        }
        #expect(try await Command.combineLatest(sources).value.count == width)
        let merged = (0..<width).map { index in
            Command<Int> { result in
                result.succeed(index)
                return nil
            }
        }
        var total = 0
        for try await value in Command.merge(merged).values { total += value }
        #expect(total == width * (width - 1) / 2)
        // A plain-dependency fan-in: one command after `width * 10` others.
        let joins = (0..<(width * 10)).map { _ in
            Command<Void> {
                $0.succeed(); return nil
            }
        }
        let last = Command<Int> { result in
            result.succeed(joins.count)
            return nil
        }
        for join in joins { last.addDependency(join) }
        #expect(try await last.value == width * 10)
    }
}
