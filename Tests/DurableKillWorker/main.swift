// The kill tests' worker: runs (or resumes) the run "kill" of a 21-step workflow on the store at
// argv[1], appending "start <step> <attempt>" and "end <step> <attempt>" to the log at argv[2] (each
// line written with O_APPEND, then fsync) around each step's work; prints "value <n>" and exits 0 when
// the run ended. The test kills it with SIGKILL at seeded random moments and starts it again.
//
// Usage: DurableKillWorker <store> <log> [seed] [lease in ms] [runs, one after the other] [ms a step]. Exits 0 with the value, 3 when the run was
// cancelled (from another process), 1 on any other error. <store> is a file's path, or a PostgreSQL URL.
import CommandDurable
import CommandDurablePostgres
import Foundation

guard Worker.arguments.count >= 3 else {
    print("usage: DurableKillWorker <store> <log> [seed] [lease in ms] [runs]")
    exit(2)
}

// DURABLE_LOG_ENTRIES=1: the library's log (CommandLogging, info and above: runs resumed, steps taken over,
// retrying, completions refused) printed, a line each: "log [<level>] <command>: <message>".
if ProcessInfo.processInfo.environment["DURABLE_LOG_ENTRIES"] == "1" {
    CommandLogging.logger = PrintedLog()
    CommandLogging.minimumLevel = .info
}

// The heartbeat (DURABLE_WORKER_MODE=heartbeat): opens the store, creates "<log>.ready", and once
// "<log>.halted" exists (the test stopped the server) starts 1,000 `await store.start` from tasks and a
// heartbeat task that ticks every 10 ms on the same concurrency pool; prints "ticks <in the first 2 s of the
// outage> worst <ms late then> whole <ms late, worst, until every start returned>" and exits 0. A process
// of its own: the test process's pool is shared with hundreds of other tests.
if ProcessInfo.processInfo.environment["DURABLE_WORKER_MODE"] == "heartbeat" {
    do {
        let store = try await Worker.openStore()
        try store.register(Quick.self)
        _ = FileManager.default.createFile(atPath: Worker.logPath + ".ready", contents: nil)
        while !FileManager.default.fileExists(atPath: Worker.logPath + ".halted") {
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        let clock = ContinuousClock()
        let beating = Locked(true)
        let heartbeat = Task { () -> [ContinuousClock.Instant] in
            var ticks: [ContinuousClock.Instant] = [clock.now]
            while beating.withLock({ $0 }) {
                try? await Task.sleep(for: .milliseconds(10))
                ticks.append(clock.now)
            }
            return ticks
        }
        let outage = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<1_000 {
                group.addTask { _ = try await store.start(Quick.self, id: "b-\(index)", input: 1) }
            }
            try await group.waitForAll()
        }
        beating.withLock { $0 = false }
        let ticks = await heartbeat.value
        func late(_ window: ClosedRange<ContinuousClock.Instant>) -> (count: Int, worst: Double) {
            let inside = ticks.filter { window.contains($0) }
            let gaps = zip(inside, inside.dropFirst()).map { $1 - $0 - .milliseconds(10) }
            let worst = gaps.max() ?? .seconds(2)
            return (inside.count, Double(worst.components.seconds) * 1e3 + Double(worst.components.attoseconds) / 1e15)
        }
        let first = late(outage...(outage + .seconds(2)))
        let whole = late(outage...clock.now)
        print("ticks \(first.count) worst \(Int(first.worst)) whole \(Int(whole.worst))")
        store.close()
        exit(0)
    } catch {
        print("error \(error)")
        exit(1)
    }
}

// Sleeps cut by a kill (DURABLE_WORKER_MODE=nap): starts the runs "n" (a 10 s sleep after a step) and "u" (a
// sleep until 10 s after its build), and once both sleeps began (their ends recorded) kills itself with
// SIGKILL: a kill at a known point, whatever the test process's load.
if ProcessInfo.processInfo.environment["DURABLE_WORKER_MODE"] == "nap" {
    do {
        let store = try await Worker.openStore()
        try store.register(WorkerNap.self)
        try store.register(WorkerNapUntil.self)
        _ = try await store.start(WorkerNap.self, id: "n", input: .init(tag: "kill", seconds: 10))
        _ = try await store.start(WorkerNapUntil.self, id: "u", input: "kill")
        while true {
            let runs = try await store.runs()
            if runs.count == 2 && runs.allSatisfy({ $0.steps.first { $0.id == "nap" }?.nextAttempt != nil }) { break }
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        kill(getpid(), SIGKILL)
    } catch {
        print("error \(error)")
        exit(1)
    }
}

// A wait for an event cut by a kill (DURABLE_WORKER_MODE=event): starts the run "e", and once its wait
// began kills itself with SIGKILL.
if ProcessInfo.processInfo.environment["DURABLE_WORKER_MODE"] == "event" {
    do {
        let store = try await Worker.openStore()
        try store.register(WorkerApproval.self)
        _ = try await store.start(WorkerApproval.self, id: "e", input: .init(tag: "kill"))
        while try await store.runs().first?.steps.first(where: { $0.id == "approval" })?.nextAttempt == nil {
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        kill(getpid(), SIGKILL)
    } catch {
        print("error \(error)")
        exit(1)
    }
}

// A child run cut by a kill (DURABLE_WORKER_MODE=child): starts the run "p" whose child "p/kid" sleeps 2 s,
// and once the child's sleep began kills itself with SIGKILL.
if ProcessInfo.processInfo.environment["DURABLE_WORKER_MODE"] == "child" {
    do {
        let store = try await Worker.openStore()
        try store.register(WorkerNapParent.self)
        try store.register(WorkerNap.self)
        _ = try await store.start(WorkerNapParent.self, id: "p", input: "kill")
        while try await store.runs().first(where: { $0.id == "p/kid" })?.steps.first(where: { $0.id == "nap" })?
            .nextAttempt == nil
        {
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        kill(getpid(), SIGKILL)
    } catch {
        print("error \(error)")
        exit(1)
    }
}

// A worker process: works the steps of runs enqueued by the test (DURABLE_WORKER_MODE=work) until the
// file "<log>.stop" exists; then drains (`stop()`) and exits 0.
if ProcessInfo.processInfo.environment["DURABLE_WORKER_MODE"] == "work" {
    do {
        let store = try await Worker.openStore()
        try store.register(KillTest.self)
        try store.register(FanFour.self)
        try store.register(Hang.self)
        try store.register(WorkerBeat.self)
        try store.register(WorkerQueued.self)
        let worker = try store.work(concurrency: 4)
        print("working")
        while !FileManager.default.fileExists(atPath: Worker.logPath + ".stop") {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        await worker.stop()
        print("worked")
        exit(0)
    } catch {
        print("error \(error)")
        exit(1)
    }
}

do {
    let store = try await Worker.openStore()
    try store.register(KillTest.self)
    for index in 0..<Worker.runs {
        let run = try await store.start(KillTest.self, id: Worker.runs == 1 ? "kill" : "kill-\(index)", input: 1)
        let value = try await run.value
        print("value \(value)")
    }
    store.close()
    exit(0)
} catch is CancellationError {
    print("cancelled")
    exit(3)
} catch {
    print("error \(error)")
    exit(1)
}
