import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// A crash tested by crashing: the worker (`Tests/DurableKillWorker`, a 21-step workflow: a chain of 10, a
/// fan-out of 10, a fan-in) is started as a child process, killed with `SIGKILL` at seeded random
/// moments, and started again (it resumes), until its run ends. Each step appends "start" and "end"
/// lines (with its attempt and pid) to an outside log, with `O_APPEND` then `fsync`.
@Suite(.serialized) struct DurableKillTests {
    /// One line of the outside log.
    struct LogLine: Equatable {
        let start: Bool
        let step: String
        let attempt: Int
        let pid: Int32
    }

    static var worker: URL {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for folder in [beside, beside.deletingLastPathComponent()] {
            let candidate = folder.appendingPathComponent("DurableKillWorker")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return URL(fileURLWithPath: ".build/debug/DurableKillWorker")
    }

    /// A started worker, and its exit status once it ended (a continuation, not a blocked thread).
    final class Child: Sendable {
        let process: Process
        private let status = Locked<(code: Int32?, waiter: CheckedContinuation<Int32, Never>?)>((nil, nil))
        let output = Pipe()

        init(
            store: String, log: String, seed: UInt64, leaseMilliseconds: Int = 30_000, runs: Int = 1,
            stepMilliseconds: Int? = nil, environment: [String: String] = [:]
        ) throws {
            process = Process()
            process.executableURL = DurableKillTests.worker
            process.arguments =
                [store, log, "\(seed)", "\(leaseMilliseconds)", "\(runs)"] + (stepMilliseconds.map { ["\($0)"] } ?? [])
            process.standardOutput = output
            if !environment.isEmpty {
                process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            }
            process.terminationHandler = { [status] process in
                let code =
                    process.terminationReason == .uncaughtSignal
                    ? -process.terminationStatus : process.terminationStatus
                let waiter = status.withLock { state -> CheckedContinuation<Int32, Never>? in
                    state.code = code
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume(returning: code)
            }
            try process.run()
        }

        /// The exit status (negative: the signal that killed it).
        func exitCode() async -> Int32 {
            await withCheckedContinuation { continuation in
                let code = status.withLock { state -> Int32? in
                    if state.code == nil { state.waiter = continuation }
                    return state.code
                }
                if let code { continuation.resume(returning: code) }
            }
        }

        func kill() { _ = Foundation.kill(process.processIdentifier, SIGKILL) }

        var printed: String {
            String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
    }

    /// Waits (without blocking a thread, up to the checkpoint's generous bound) until the log at `path`
    /// says `shows`: true when it did.
    static func logShows(_ path: String, _ shows: @escaping @Sendable ([LogLine]) -> Bool) async -> Bool {
        let seen = Checkpoint()
        Task {
            while !shows(readLog(path)) { try? await Task.sleep(nanoseconds: 1_000_000) }
            seen.fulfill()
        }
        return await seen.wait()
    }

    static func readLog(_ path: String) -> [LogLine] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 4, let attempt = Int(fields[2]), let pid = Int32(fields[3]) else { return nil }
            return LogLine(start: fields[0] == "start", step: String(fields[1]), attempt: attempt, pid: pid)
        }
    }

    @Test(.tags(.stress)) func killedAtRandomMoments_everyStepIsRecordedOnce_andTheValueIsRight() async throws {
        let kills = StressScale.pick(short: 20, long: 1_000, sanitized: 20)
        // Enough work for the kills: 21 steps of 5-30 ms a run, runs one after the other.
        let runs = StressScale.pick(short: 20, long: 500, sanitized: 20)
        let seed = UInt64.random(in: 1...UInt64.max)
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = folder.file(), log = folder.file("steps.log")
        // The kills are timed on a thread of the test's own (it sleeps between a start and its kill, and
        // waits for each child there): the concurrency pool, busy with other suites, would resume a
        // sleeping task late and let the worker finish before its first kill.
        let outcome = await withCheckedContinuation {
            (continuation: CheckedContinuation<(Int, Int, String, [String]), Never>) in
            let thread = Thread {
                var random = SeededRandom(seed: seed)
                var killed = 0, starts = 0
                var finalOutput = ""
                var problems: [String] = []
                while true {
                    starts += 1
                    guard let child = try? Child(store: store, log: log, seed: seed, runs: runs) else {
                        problems.append("the worker did not start")
                        break
                    }
                    if killed < kills {
                        // The kill's moment (seeded), not a wait for anything.
                        usleep(UInt32.random(in: 2_000...120_000, using: &random))
                        child.kill()
                    }
                    child.process.waitUntilExit()
                    let code =
                        child.process.terminationReason == .uncaughtSignal
                        ? -child.process.terminationStatus : child.process.terminationStatus
                    if code == -SIGKILL {
                        killed += 1
                    } else {
                        finalOutput = child.printed
                        if code != 0 { problems.append("the worker exited with \(code): \(finalOutput)") }
                        if code == 0 || killed >= kills { break }
                    }
                    if starts > kills * 3 + 20 {
                        problems.append("no end after \(starts) starts")
                        break
                    }
                }
                continuation.resume(returning: (killed, starts, finalOutput, problems))
            }
            thread.start()
        }
        let (killed, starts, finalOutput, problems) = outcome
        #expect(problems.isEmpty, "seed \(seed): \(problems)")
        #expect(finalOutput.contains("value 145"), "seed \(seed): \(finalOutput)")
        #expect(killed >= kills, "seed \(seed): only \(killed) kills before the runs ended")

        // The store: every run completed, every step recorded completed, its attempts as the log says.
        let reader = try DurableStore(path: store)
        defer { reader.close() }
        let records = try await reader.runs()
        #expect(records.count == runs, "seed \(seed): \(records.count) runs recorded")
        let lines = Self.readLog(log)
        for record in records {
            #expect(record.state == .completed, "seed \(seed)")
            #expect(record.steps.count == 21)
            for step in record.steps {
                let id = "\(record.id)/\(step.id)"
                #expect(step.state == .completed, "seed \(seed): \(id) \(step.state)")
                let starts = lines.filter { $0.start && $0.step == id }
                // Attempts began in order, each at most once (an attempt claimed by a process killed before
                // it made the step's command has no line), and the recorded one is the last that began.
                let attempts = starts.map(\.attempt)
                #expect(
                    attempts == attempts.sorted() && Set(attempts).count == attempts.count,
                    "seed \(seed): \(id) \(starts)")
                #expect(attempts.last == step.attempts, "seed \(seed): \(id) log \(attempts), store \(step.attempts)")
                // A step ran more than once only when a kill fell between its start and its recorded end:
                // every earlier attempt's process was killed.
                let killedPids = Set(lines.map(\.pid)).subtracting([starts.last?.pid ?? 0])
                for earlier in starts.dropLast() {
                    #expect(killedPids.contains(earlier.pid), "seed \(seed): \(id) attempt \(earlier.attempt)")
                }
                // An attempt before the last ran in a process that was killed: its pid never started the
                // next attempt of that step.
                for earlier in starts.dropLast() {
                    #expect(starts.last!.pid != earlier.pid, "seed \(seed): \(id) ran twice in pid \(earlier.pid)")
                }
            }
        }
        print(
            "kill test: seed \(seed), \(killed) kills, \(starts) starts, \(lines.filter(\.start).count) step starts for \(21 * runs) steps"
        )
    }

    /// Two workers on one store and one run: each step runs in one of them at a time; when one is killed
    /// while it holds steps, the other takes them over at once (its owner's pid is gone), and ends the run.
    @Test func twoProcesses_oneKilled_theOtherTakesItsStepsOver() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = folder.file(), log = folder.file("steps.log")
        // Made first, so both workers find the store there.
        try DurableStore(path: store).close()
        let first = try Child(store: store, log: log, seed: 3)
        let second = try Child(store: store, log: log, seed: 4)
        // Kill the first once it has started a step of the fan-out (or a later one).
        #expect(await Self.logShows(log) { $0.contains { $0.start && $0.step.hasPrefix("kill/f") } })
        first.kill()
        _ = await first.exitCode()
        #expect(await second.exitCode() == 0)
        #expect(second.printed.contains("value 145"))
        let lines = Self.readLog(log)
        // Never one step in two processes at once: between an attempt's start and its end, no other
        // attempt of that step starts, unless its process was killed.
        let killedPid = first.process.processIdentifier
        for step in Set(lines.map(\.step)) {
            var open: LogLine?
            for line in lines where line.step == step {
                if line.start {
                    if let running = open { #expect(running.pid == killedPid, "\(step) ran in two processes at once") }
                    open = line
                } else {
                    open = nil
                }
            }
        }
        let reader = try DurableStore(path: store)
        defer { reader.close() }
        #expect(try await reader.runs().first?.steps.allSatisfy { $0.state == .completed } == true)
    }

    /// A cancel recorded by another process stops the run in the worker at its next lease renewal.
    @Test func aCancelFromAnotherProcess_stopsTheWorker() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = folder.file(), log = folder.file("steps.log")
        try DurableStore(path: store).close()
        // Its first step never ends (10 minutes): the cancel finds the run running however slow this
        // machine is.
        let worker = try Child(store: store, log: log, seed: 5, leaseMilliseconds: 600, stepMilliseconds: 600_000)
        #expect(await Self.logShows(log) { !$0.isEmpty })
        let canceller = try DurableStore(path: store)
        try await canceller.cancel(runID: "kill")
        #expect(await worker.exitCode() == 3, "\(worker.printed)")
        #expect(try await canceller.runs().first?.state == .cancelled)
        canceller.close()
    }

    /// A stalled owner (stopped with `SIGSTOP` past its lease, then `SIGCONT`): another process took its
    /// step over; the stalled one's late completion is refused, and the step is recorded once.
    @Test func aStalledOwner_pastItsLease_hasItsLateCompletionRefused() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = folder.file(), log = folder.file("steps.log")
        try DurableStore(path: store).close()
        // It stops itself (`SIGSTOP`) as it starts step c2, holding that step's claim.
        let stalled = try Child(
            store: store, log: log, seed: 6, leaseMilliseconds: 300, stepMilliseconds: 100,
            environment: ["DURABLE_STOP_AT": "c2"])
        #expect(await Self.logShows(log) { $0.contains { $0.start && $0.step == "kill/c2" } })
        let other = try Child(store: store, log: log, seed: 7, leaseMilliseconds: 300)
        #expect(await other.exitCode() == 0)
        #expect(other.printed.contains("value 145"))
        _ = Foundation.kill(stalled.process.processIdentifier, SIGCONT)
        #expect(await stalled.exitCode() == 0)
        #expect(stalled.printed.contains("value 145"))

        let reader = try DurableStore(path: store)
        defer { reader.close() }
        let steps = try #require(try await reader.runs().first?.steps)
        #expect(steps.allSatisfy { $0.state == .completed })
        // The step the stalled process held was taken over: a second attempt, in the other process.
        let lines = Self.readLog(log)
        let stalledPid = stalled.process.processIdentifier
        let takenOver = steps.filter { $0.attempts > 1 }
        #expect(!takenOver.isEmpty)
        for step in takenOver {
            let starts = lines.filter { $0.start && $0.step == "kill/\(step.id)" }
            // The other process ran its last attempt; an earlier one (if it began: a step claimed with
            // the completion of the one before has no line until it runs) was the stalled process's.
            #expect(starts.last?.pid == other.process.processIdentifier)
            #expect(starts.dropLast().allSatisfy { $0.pid == stalledPid })
        }
    }
}
