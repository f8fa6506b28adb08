import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// Runs recorded for workers (`enqueue`) and worked by them (`work(concurrency:)`): in this process on
/// one file through two stores, and in worker processes.
@Suite(.serialized) struct DurableWorkerTests {
    @Test func anEnqueuedRun_isWorkedByAWorker_andItsValueArrives() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let web = try DurableStore(path: folder.file())
        try web.register(Sum.self)
        let run = try await web.enqueue(Sum.self, id: "e1", input: .init(tag: "enqueued"))
        #expect(Probe.counter.count("enqueued/sum") == 0)  // nothing runs where it was enqueued
        let host = try DurableStore(path: folder.file())
        try host.register(Sum.self)
        let worker = try host.work(concurrency: 2)
        #expect(try await run.value == 5)
        await worker.stop()
        #expect(worker.running == 0)
        let record = try #require(try await web.runs().first)
        #expect(record.state == .completed && record.steps.allSatisfy { $0.state == .completed && $0.attempts == 1 })
        #expect(Probe.counter.count("enqueued/sum") == 1)
        web.close()
        host.close()
    }

    @Test func aWorkflowAWorkerDidNotRegister_isLeftForOneThatDid() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let web = try DurableStore(path: folder.file())
        try web.register(Sum.self)
        let run = try await web.enqueue(Sum.self, id: "e2", input: .init(tag: "unregistered-worker"))
        let stranger = try DurableStore(path: folder.file())
        try stranger.register(DurableRuleTests.Flaky.self)
        let idle = try stranger.work()
        let host = try DurableStore(path: folder.file())
        try host.register(Sum.self)
        let worker = try host.work()
        #expect(try await run.value == 5)
        await idle.stop()
        await worker.stop()
        #expect(Probe.counter.count("unregistered-worker/sum") == 1)
        for store in [web, stranger, host] { store.close() }
    }

    @Test func aFailingStep_failsTheEnqueuedRun_forTheEnqueuer() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        Probe.failuresLeft.withLock { $0["worker-fails"] = 10 }
        let web = try DurableStore(path: folder.file())
        try web.register(DurableRuleTests.Flaky.self)
        let run = try await web.enqueue(DurableRuleTests.Flaky.self, id: "f", input: "worker-fails")
        let host = try DurableStore(path: folder.file())
        try host.register(DurableRuleTests.Flaky.self)
        let worker = try host.work()
        do {
            _ = try await run.value
            Issue.record("the run did not fail")
        } catch let error as DurableError {
            guard case .stepFailed(let step, let message) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(step == "flaky" && message.contains("flaky attempt 3"))
        }
        await worker.stop()
        web.close()
        host.close()
    }

    /// The kill worker's workflow as the enqueuing side sees it: the same name, step ids and types (its
    /// commands never run here).
    struct KillTestShape: DurableWorkflow {
        static let name = "kill-test"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
            var previous = flow.step("c0") { _ in Command.just(0) }
            for index in 1..<10 {
                previous = flow.step("c\(index)", after: previous) { _, value in Command.just(value) }
            }
            let chain = previous
            let fan = (0..<10).map { index in flow.step("f\(index)", after: chain) { _, value in Command.just(value) } }
            return flow.step(
                "total", after: fan[0], fan[1], fan[2], fan[3], fan[4], fan[5], fan[6], fan[7], fan[8], fan[9]
            ) { _, a, _, _, _, _, _, _, _, _, _ in Command.just(a) }
        }
    }

    /// Two worker processes and this one enqueuing, on one file: every run completes with its value, every
    /// step recorded completed, the steps spread over both workers; one worker killed in the middle, the
    /// other takes its steps over at once (its owner's process is gone).
    @Test func workerProcesses_shareTheRuns_andOneKilled_leavesNothingBehind() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = folder.file(), log = folder.file("steps.log")
        let web = try DurableStore(path: store)
        defer { web.close() }
        try web.register(KillTestShape.self)
        let count = 10
        var runs: [DurableRun<Int>] = []
        for index in 0..<count { runs.append(try await web.enqueue(KillTestShape.self, id: "kill-\(index)", input: 1)) }
        let mode = ["DURABLE_WORKER_MODE": "work"]
        // Steps of 50 ms: the work lasts seconds, so both workers are at it before one is killed.
        let first = try DurableKillTests.Child(
            store: store, log: log, seed: 8, runs: count, stepMilliseconds: 50, environment: mode)
        let second = try DurableKillTests.Child(
            store: store, log: log, seed: 9, runs: count, stepMilliseconds: 50, environment: mode)
        let firstPid = first.process.processIdentifier, secondPid = second.process.processIdentifier
        #expect(
            await DurableKillTests.logShows(log) { lines in
                let pids = Set(lines.filter(\.start).map(\.pid))
                return pids.contains(firstPid) && pids.contains(secondPid)
            })
        first.kill()
        for run in runs { #expect(try await run.value == 145) }
        _ = FileManager.default.createFile(atPath: log + ".stop", contents: nil)
        #expect(await second.exitCode() == 0, "\(second.printed)")
        _ = await first.exitCode()
        let records = try await web.runs()
        #expect(records.count == count && records.allSatisfy { $0.state == .completed })
        #expect(records.allSatisfy { $0.steps.allSatisfy { $0.state == .completed } })
        let pids = Set(DurableKillTests.readLog(log).filter(\.start).map(\.pid))
        #expect(pids.count >= 2, "steps ran in \(pids.count) process(es)")
    }

    /// A run only recorded (the web route's `_ = try await store.enqueue(...)`) is not watched; asking for
    /// its value watches it until it ends; a cancel before anyone asked is recorded.
    @Test func anEnqueuedRun_isWatchedOnlyOnceItsEndIsAskedFor() async throws {
        let store = try DurableStore.inMemory()
        defer { store.close() }
        try store.register(Sum.self)
        for index in 0..<3 {
            try await store.enqueue(Sum.self, id: "quiet-\(index)", input: .init(tag: "quiet-\(index)"))
        }
        #expect(DurableMeasurements.watchedRuns(of: store) == 0)
        let asked = try await store.enqueue(Sum.self, id: "asked", input: .init(tag: "asked"))
        let cancelled = try await store.enqueue(Sum.self, id: "cancelled", input: .init(tag: "cancelled"))
        cancelled.cancel()
        #expect(await eventually { (try? await store.runs(.state(.cancelled)).map(\.id)) == ["cancelled"] })
        let worker = try store.work()
        #expect(try await asked.value == 5)
        #expect(DurableMeasurements.watchedRuns(of: store) == 0)
        await worker.stop()
        #expect(try await store.runs(.state(.completed)).count == 4)
    }
}

/// Many runs recorded at once: one transaction, nothing recorded when one of them is refused.
@Suite struct DurableBulkTests {
    @Test(arguments: StoreKind.allCases) func manyRunsAtOnce_areRecordedTogether_orNotAtAll(kind: StoreKind)
        async throws
    {
        guard let fresh = try await freshStore(kind, Sum.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        // 250 runs: three statements of up to 100 rows for the runs, eight for their 750 steps.
        let entries = (0..<250).map { (id: "bulk-\($0)", input: Sum.Input(tag: "\(kind)-bulk-\($0)")) }
        let enqueued = try await store.enqueue(Sum.self, runs: entries)
        #expect(enqueued.map(\.id) == entries.map(\.id))
        #expect(try await store.runs(.state(.running)).count == 250)

        // Refused as a whole: an id given twice, or (with .fail) an id the store has.
        await #expect(throws: DurableError.self) {
            try await store.enqueue(Sum.self, runs: [("twice", .init(tag: "t")), ("twice", .init(tag: "t"))])
        }
        await #expect(throws: DurableError.runExists("bulk-7")) {
            try await store.enqueue(
                Sum.self, runs: [("new-1", .init(tag: "n")), ("bulk-7", .init(tag: "n"))], ifExists: .fail)
        }
        #expect(try await store.runs().count == 250)

        // With .keep, the runs it has are given back and the others recorded.
        let kept = try await store.enqueue(Sum.self, runs: [("bulk-0", .init(tag: "x")), ("new-2", .init(tag: "x"))])
        #expect(kept.map(\.id) == ["bulk-0", "new-2"])
        #expect(try await store.runs().count == 251)

        let worker = try store.work(concurrency: 8)
        for run in enqueued + kept { #expect(try await run.value == 5) }
        let started = try await store.start(Sum.self, runs: (0..<3).map { ("started-\($0)", .init(tag: "s\($0)")) })
        for run in started { #expect(try await run.value == 5) }
        await worker.stop()
        #expect(try await store.runs(.state(.completed)).count == 254)
    }
}
