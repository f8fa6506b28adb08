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

// A worker process: works the steps of runs enqueued by the test (DURABLE_WORKER_MODE=work) until the
// file "<log>.stop" exists; then drains (`stop()`) and exits 0.
if ProcessInfo.processInfo.environment["DURABLE_WORKER_MODE"] == "work" {
    do {
        let store = try await Worker.openStore()
        try store.register(KillTest.self)
        try store.register(FanFour.self)
        try store.register(Hang.self)
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
