import CommandDurable
import CommandDurablePostgres
import CommandDurablePostgresTesting
import CommandTestSupport
import Foundation
import Testing

/// The PostgreSQL store's own cases, on a throwaway server the tests start (skipped, with a printed note,
/// where PostgreSQL is not installed): bad input, worker processes sharing a database (killed, stalled,
/// cut off by a server restart).
@Suite(.serialized) struct PostgresStoreTests {
    /// The enqueuing side's view of the workers' `FanFour` (same name, step ids and types).
    struct FanFourShape: DurableWorkflow {
        static let name = "fan-four"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
            let first = flow.step("first") { _ in Command.just(input) }
            let fan = (0..<4).map { index in flow.step("f\(index)", after: first) { _, value in Command.just(value) } }
            return flow.step("total", after: fan[0], fan[1], fan[2], fan[3]) { _, a, _, _, _ in Command.just(a) }
        }
    }

    /// The enqueuing side's view of the workers' `Hang`.
    struct HangShape: DurableWorkflow {
        static let name = "hang"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
            flow.step("hang") { _ in Command.just(input) }
        }
    }

    static func databaseName(_ url: String) -> String { URL(string: url)?.lastPathComponent ?? "" }

    static func pid(ofOwner owner: String?) -> Int32? {
        owner.flatMap { $0.split(separator: "/").dropFirst().first.flatMap { Int32($0) } }
    }

    /// Raw lines of the outside log: (what, run/step, attempt, pid).
    static func lines(_ path: String) -> [(what: String, step: String, attempt: Int, pid: Int32)] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 4, let attempt = Int(fields[2]), let pid = Int32(fields[3]) else { return nil }
            return (String(fields[0]), String(fields[1]), attempt, pid)
        }
    }

    static func worker(
        _ url: String, log: String, seed: UInt64, lease: Int, stepMilliseconds: Int, stopAt: String? = nil,
        logEntries: Bool = false
    ) throws -> DurableKillTests.Child {
        var environment = ["DURABLE_WORKER_MODE": "work"]
        if let stopAt { environment["DURABLE_STOP_AT"] = stopAt }
        if logEntries { environment["DURABLE_LOG_ENTRIES"] = "1" }
        return try DurableKillTests.Child(
            store: url, log: log, seed: seed, leaseMilliseconds: lease, stepMilliseconds: stepMilliseconds,
            environment: environment)
    }

    /// Leases are judged by the database's clock: a process whose host clock is an hour behind claims a
    /// step with a lease that another process (on time) does not see as expired, so it does not take the
    /// step over. (By each host's clock, that lease ended an hour ago.)
    @Test func leases_areJudgedByTheDatabasesClock_notTheHosts() async throws {
        guard let server = try await SharedPostgres.available() else { return }
        let url = try await server.makeDatabase()
        let late = try await DurableStore(postgres: url)
        defer { late.close() }
        try #require(DurableMeasurements.thread(of: late)).skewHostClock(by: -3_600)
        try late.register(DurableWorkerCancelTests.Waits.self)
        let onTime = try await DurableStore(postgres: url)
        defer { onTime.close() }
        try onTime.register(DurableWorkerCancelTests.Waits.self)
        try onTime.register(Sum.self)
        let tag = "postgres-skewed-clock"
        let held = try await late.start(DurableWorkerCancelTests.Waits.self, id: "skewed", input: tag)
        #expect(await eventually { Probe.counter.count("\(tag)/wait") == 1 })
        // The worker's look that finds this later run also judges the held step's lease.
        let worker = try onTime.work()
        #expect(try await onTime.enqueue(Sum.self, id: "after", input: .init(tag: "\(tag)-after")).value == 5)
        let step = try #require(try await onTime.runs(.init(workflow: "waits")).first?.steps.first)
        #expect(step.state == .running && step.attempts == 1 && step.owner == late.owner, "\(step)")
        #expect(Probe.counter.count("\(tag)/wait") == 1)
        held.cancel()  // first: a step taken over (the defect) would keep the worker's stop waiting
        #expect("\(await terminalState(of: held))".hasPrefix("cancelled"))
        await worker.stop()
    }

    // MARK: Bad input

    @Test func anUnreachableServer_orWrongCredentials_throwStorage_namingTheHost_notThePassword() async throws {
        guard let server = try await SharedPostgres.available() else { return }
        do {
            _ = try await DurableStore(postgres: "postgresql://app:hunter2@127.0.0.1:1/app")
            Issue.record("a store opened on a port nothing listens on")
        } catch DurableError.storage(let message) {
            #expect(message.contains("127.0.0.1:1") && message.contains("could not connect"), "\(message)")
            #expect(!message.contains("hunter2"))
        }
        let url = try await server.makeDatabase()
        do {
            _ = try await DurableStore(postgres: server.url(database: Self.databaseName(url), password: "wrong-secret"))
            Issue.record("a store opened with a wrong password")
        } catch DurableError.storage(let message) {
            #expect(message.contains("127.0.0.1:\(server.port)") && message.contains("password"), "\(message)")
            #expect(!message.contains("wrong-secret"))
        }
    }

    /// A schema made at version 1 (its DDL as that version wrote it, with a run in it) is upgraded in
    /// place to the current one: the same indexes as SQLite's, the run kept.
    @Test func aSchemaOfVersion1_isUpgradedInPlace() async throws {
        guard let server = try await SharedPostgres.available() else { return }
        let url = try await server.makeDatabase()
        try await server.psql(
            """
            CREATE SCHEMA awesomecommand;
            SET search_path TO awesomecommand;
            CREATE TABLE runs(id text PRIMARY KEY, workflow text NOT NULL, input bytea NOT NULL,
                state text NOT NULL, cancel_requested integer NOT NULL DEFAULT 0,
                created double precision NOT NULL, updated double precision NOT NULL, error text,
                error_kind text, error_step text, final_step text NOT NULL);
            CREATE TABLE steps(run_id text NOT NULL, step_id text NOT NULL, position integer NOT NULL,
                state text NOT NULL, attempt integer NOT NULL DEFAULT 0,
                failures integer NOT NULL DEFAULT 0, owner text, lease_until double precision,
                value bytea, error text, error_type text, next_attempt_at double precision,
                started double precision, ended double precision, after text NOT NULL DEFAULT '',
                PRIMARY KEY (run_id, step_id));
            CREATE TABLE meta(version integer NOT NULL);
            INSERT INTO meta(version) VALUES (1);
            CREATE INDEX unfinished_runs ON runs(created) WHERE state IN ('pending', 'running');
            CREATE INDEX ended_runs ON runs(updated) WHERE state IN ('completed', 'failed', 'cancelled');
            CREATE INDEX live_steps ON steps(run_id) WHERE state IN ('pending', 'running');
            INSERT INTO runs(id, workflow, input, state, created, updated, final_step)
                VALUES ('old', 'fan-four', convert_to('3', 'UTF8'), 'completed', 1, 2, 'total');
            INSERT INTO steps(run_id, step_id, position, state, attempt, value, after)
                VALUES ('old', 'total', 5, 'completed', 1, convert_to('18', 'UTF8'), '');
            INSERT INTO runs(id, workflow, input, state, created, updated, final_step)
                VALUES ('mid', 'three', convert_to('1', 'UTF8'), 'running', 3, 3, 'c');
            INSERT INTO steps(run_id, step_id, position, state, attempt, value, after) VALUES
                ('mid', 'a', 0, 'completed', 1, convert_to('1', 'UTF8'), ''),
                ('mid', 'b', 1, 'pending', 0, NULL, '0'),
                ('mid', 'c', 2, 'pending', 0, NULL, '0,1');
            """, database: Self.databaseName(url))
        let store = try await DurableStore(postgres: url)
        defer { store.close() }
        let version = try await DurableMeasurements.query("SELECT version FROM meta", on: store).first?.first?.int
        #expect(version == 5)
        // Each pending step's count of predecessors not completed, its run's workflow and creation.
        let steps = try await DurableMeasurements.query(
            "SELECT step_id, waiting, workflow, queued FROM steps WHERE run_id = 'mid' ORDER BY position", on: store)
        #expect(steps.map { $0[0].string ?? "" } == ["a", "b", "c"])
        #expect(steps.map { $0[1].int ?? -1 } == [0, 0, 1])
        #expect(steps.allSatisfy { $0[2].string == "three" && $0[3].double == 3 })
        let indexes = Set(
            try await DurableMeasurements.query(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'awesomecommand' AND indexname NOT LIKE '%pkey'",
                on: store
            ).compactMap { $0.first?.string })
        #expect(
            indexes == [
                "unfinished_runs", "ended_runs", "live_steps", "running_steps", "ready_steps", "leased_steps",
                "deadline_runs", "due_schedules", "child_runs", "queue_starts_by_time", "queued_running",
                "queued_ready", "changes_by_time",
            ])
        let record = try #require(try await store.runs().first)
        #expect(record.id == "old" && record.state == .completed)
        #expect(record.output.flatMap { String(data: $0, encoding: .utf8) } == "18")
    }

    @Test func aNewerSchema_isRefused_andAnotherSchemaOfThatName_isNotAStore_bothLeftUntouched() async throws {
        guard let server = try await SharedPostgres.available() else { return }
        let url = try await server.makeDatabase()
        try await DurableStore(postgres: url).close()
        try await server.psql("UPDATE awesomecommand.meta SET version = 99", database: Self.databaseName(url))
        await #expect(throws: DurableError.newerSchema(found: 99, supported: 5)) {
            try await DurableStore(postgres: url)
        }
        await #expect(throws: DurableError.newerSchema(found: 99, supported: 5)) {
            try await DurableStore(postgres: url)
        }

        let other = try await server.makeDatabase()
        try await server.psql(
            "CREATE SCHEMA awesomecommand; CREATE TABLE awesomecommand.mine(x int)", database: Self.databaseName(other))
        do {
            _ = try await DurableStore(postgres: other)
            Issue.record("another schema named awesomecommand was taken for a store")
        } catch DurableError.notAStore(let place) {
            #expect(place.contains("awesomecommand") && place.contains("127.0.0.1"))
        }
    }

    @Test func aWorkflowNotRegisteredHere_isLeftForAWorkerThatDid() async throws {
        guard let place = try await StorePlace.make(.postgres) else { return }
        let web = try await place.open()
        defer { web.close() }
        try web.register(Sum.self)
        let run = try await web.enqueue(Sum.self, id: "left", input: .init(tag: "postgres-left"))
        let stranger = try await place.open()
        defer { stranger.close() }
        try stranger.register(FanFourShape.self)
        let idle = try stranger.work()
        let host = try await place.open()
        defer { host.close() }
        try host.register(Sum.self)
        let worker = try host.work()
        #expect(try await run.value == 5)
        await idle.stop()
        await worker.stop()
        let owners = Set(try await web.runs().first?.steps.compactMap(\.owner) ?? [])
        #expect(owners == [host.owner])
    }

    // MARK: Processes on one database

    /// Three worker processes and this one enqueuing: 200 runs of a fan-out of 4 and a fan-in; one worker
    /// killed with SIGKILL in the middle of steps, started again, killed again. Every run completes with
    /// its value, every step is recorded completed, the killed worker's steps are taken over after its
    /// lease, the steps are spread over the workers; then a cancel from here stops a step on a worker.
    @Test func threeWorkers_200Runs_oneKilledTwice_everyRunCompletes_andACancelReachesTheWorkers() async throws {
        guard let server = try await SharedPostgres.available() else { return }
        let url = try await server.makeDatabase()
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let log = folder.file("steps.log")
        let web = try await DurableStore(postgres: url, lease: .seconds(1))
        defer { web.close() }
        try web.register(FanFourShape.self)
        try web.register(HangShape.self)
        var runs: [DurableRun<Int>] = []
        for index in 0..<200 { runs.append(try await web.enqueue(FanFourShape.self, id: "fan-\(index)", input: index)) }
        let lease = 1_000
        let steady = [
            try Self.worker(url, log: log, seed: 1, lease: lease, stepMilliseconds: 20),
            try Self.worker(url, log: log, seed: 2, lease: lease, stepMilliseconds: 20),
        ]
        var killed: [Int32] = []
        for round in 0..<2 {
            // Its steps never end (10 minutes): the kill lands while every step it began is running,
            // however late this process sees the log.
            let victim = try Self.worker(
                url, log: log, seed: UInt64(10 + round), lease: lease, stepMilliseconds: 600_000)
            let pid = victim.process.processIdentifier
            // Killed while it has a step begun and not ended.
            #expect(
                await DurableKillTests.logShows(log) { _ in
                    let mine = Self.lines(log).filter { $0.pid == pid }
                    let started = Set(mine.filter { $0.what == "start" }.map(\.step))
                    let ended = Set(mine.filter { $0.what == "end" }.map(\.step))
                    return !started.subtracting(ended).isEmpty
                })
            victim.kill()
            #expect(await victim.exitCode() == -SIGKILL)
            killed.append(pid)
        }
        for (index, run) in runs.enumerated() { #expect(try await run.value == 4 * index + 6) }

        // A cancel from here reaches the worker running the step.
        let hanging = try await web.enqueue(HangShape.self, id: "hang-1", input: 0)
        #expect(await DurableKillTests.logShows(log) { _ in Self.lines(log).contains { $0.step == "hang-1/hang" } })
        try await web.cancel(runID: "hang-1")
        #expect(
            await DurableKillTests.logShows(log) { _ in
                Self.lines(log).contains { $0.what == "cancelled" && $0.step == "hang-1/hang" }
            })
        #expect("\(await terminalState(of: hanging, start: true))".hasPrefix("cancelled"))

        _ = FileManager.default.createFile(atPath: log + ".stop", contents: nil)
        for worker in steady { #expect(await worker.exitCode() == 0, "\(worker.printed)") }

        let records = try await web.runs(.workflow("fan-four"))
        #expect(records.count == 200 && records.allSatisfy { $0.state == .completed })
        #expect(records.allSatisfy { $0.steps.count == 6 && $0.steps.allSatisfy { $0.state == .completed } })
        // Who recorded each step: at least two workers, never a killed one for a step it began and lost.
        let owners = Set(records.flatMap(\.steps).compactMap { Self.pid(ofOwner: $0.owner) })
        #expect(owners.count >= 2, "steps recorded by \(owners.count) worker(s)")
        let logLines = Self.lines(log)
        var takenOver = 0
        for pid in killed {
            let mine = logLines.filter { $0.pid == pid }
            let lost = Set(mine.filter { $0.what == "start" }.map(\.step)).subtracting(
                mine.filter { $0.what == "end" }.map(\.step))
            for step in lost {
                let parts = step.split(separator: "/")
                let record = records.first { $0.id == parts[0] }?.steps.first { $0.id == parts[1] }
                #expect(record?.state == .completed && Self.pid(ofOwner: record?.owner) != pid, "\(step)")
                #expect((record?.attempts ?? 0) >= 2, "\(step) was not begun again")
                takenOver += 1
            }
        }
        #expect(takenOver >= 2, "the killed workers lost \(takenOver) steps")
    }

    /// A worker stopped with SIGSTOP past its lease: another takes its steps over and records them; the
    /// stalled one, continued, ends its step late and has its completion refused: recorded once.
    @Test func aStalledWorker_pastItsLease_hasItsLateCompletionRefused() async throws {
        guard let server = try await SharedPostgres.available() else { return }
        let url = try await server.makeDatabase()
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let log = folder.file("steps.log")
        let web = try await DurableStore(postgres: url, lease: .milliseconds(500))
        defer { web.close() }
        try web.register(FanFourShape.self)
        // It stops itself (`SIGSTOP`) as it starts the step, holding its claim.
        let stalled = try Self.worker(
            url, log: log, seed: 1, lease: 500, stepMilliseconds: 400, stopAt: "first", logEntries: true)
        let stalledPid = stalled.process.processIdentifier
        let run = try await web.enqueue(FanFourShape.self, id: "stall", input: 1)
        #expect(
            await DurableKillTests.logShows(log) { _ in
                Self.lines(log).contains { $0.pid == stalledPid && $0.step == "stall/first" && $0.what == "start" }
            })
        let other = try Self.worker(url, log: log, seed: 2, lease: 500, stepMilliseconds: 10, logEntries: true)
        #expect(try await run.value == 10)
        _ = kill(stalledPid, SIGCONT)
        // The stalled worker's step ends (late), then its completion is refused: drained, it exits.
        _ = FileManager.default.createFile(atPath: log + ".stop", contents: nil)
        #expect(await stalled.exitCode() == 0, "\(stalled.printed)")
        #expect(await other.exitCode() == 0, "\(other.printed)")
        let late = Self.lines(log).filter { $0.pid == stalledPid && $0.step == "stall/first" }
        #expect(late.map(\.what) == ["start", "end"], "the stalled step did not end late: \(late)")
        let step = try #require(try await web.runs().first?.steps.first { $0.id == "first" })
        #expect(step.state == .completed && step.attempts == 2)
        #expect(Self.pid(ofOwner: step.owner) == other.process.processIdentifier)
        // CommandLogging's durable entries, as each process logged them.
        #expect(
            other.printed.contains("log [notice] fan-four/stall/first: taken over"), "\(other.printed)")
        #expect(
            stalled.printed.contains(
                "log [warning] fan-four/stall/first: completion refused: the step is no longer this process's"),
            "\(stalled.printed)")
    }

    /// The server restarted under a worker (every connection cut): the worker and this process open their
    /// connections again, and every run completes with nothing lost.
    @Test func aServerRestart_underAWorker_losesNoRecord() async throws {
        guard let (server, url) = try await ownPostgres() else { return }
        defer { server.stop() }
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let log = folder.file("steps.log")
        let web = try await DurableStore(postgres: url, lease: .seconds(2))
        defer { web.close() }
        try web.register(FanFourShape.self)
        var runs: [DurableRun<Int>] = []
        for index in 0..<30 { runs.append(try await web.enqueue(FanFourShape.self, id: "r-\(index)", input: index)) }
        let worker = try Self.worker(url, log: log, seed: 1, lease: 2_000, stepMilliseconds: 30)
        #expect(await DurableKillTests.logShows(log) { _ in Self.lines(log).filter { $0.what == "end" }.count >= 10 })
        try await server.restart()
        for (index, run) in runs.enumerated() { #expect(try await run.value == 4 * index + 6) }
        _ = FileManager.default.createFile(atPath: log + ".stop", contents: nil)
        #expect(await worker.exitCode() == 0, "\(worker.printed)")
        let records = try await web.runs()
        #expect(records.count == 30 && records.allSatisfy { $0.state == .completed })
        #expect(records.allSatisfy { $0.steps.allSatisfy { $0.state == .completed } })
    }
}

/// A cancel recorded by one store reaches the step a worker of another store runs (the store's
/// notification on a server; the worker's look on SQLite).
@Suite struct DurableWorkerCancelTests {
    static let cancelled = Locked<Set<String>>([])

    struct Waits: DurableWorkflow {
        static let name = "waits"
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            flow.step("wait") { _ in
                Command<Int> { result in
                    Probe.counter.hit("\(input)/wait")
                    Probe.held.withLock { $0[input] = result }  // kept: the step ends only when cancelled
                    return BlockCancelable { DurableWorkerCancelTests.cancelled.withLock { _ = $0.insert(input) } }
                }
            }
        }
    }

    @Test(arguments: StoreKind.allCases) func aCancelFromAnotherStore_cancelsTheWorkersStep(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let web = try await place.open()
        defer { web.close() }
        try web.register(Waits.self)
        let host = try await place.open()
        defer { host.close() }
        try host.register(Waits.self)
        let worker = try host.work()
        let tag = "\(kind)-waits"
        let run = try await web.enqueue(Waits.self, id: "w", input: tag)
        let started = Checkpoint()
        Task {
            while Probe.counter.count("\(tag)/wait") == 0 { try? await Task.sleep(nanoseconds: 1_000_000) }
            started.fulfill()
        }
        #expect(await started.wait())
        try await web.cancel(runID: "w")
        let stopped = Checkpoint()
        Task {
            while !Self.cancelled.withLock({ $0.contains(tag) }) { try? await Task.sleep(nanoseconds: 1_000_000) }
            stopped.fulfill()
        }
        #expect(await stopped.wait())
        // Its end asked for now (an enqueued run is watched from then on): the recorded cancel.
        #expect("\(await terminalState(of: run, start: true))".hasPrefix("cancelled"))
        await worker.stop()
    }

    /// A run started (not enqueued) in one store, cancelled from another: its step running in the first
    /// stops within 8 s, before the next lease renewal could have told it (every 10 s, a third of the
    /// lease: it waited for that once; now the store's notification on a server, its 50 ms look on
    /// SQLite). 8 s, not less: the whole suite in parallel once made the 50 ms look take more than 3 s.
    @Test(arguments: StoreKind.allCases) func aCancelFromAnotherStore_reachesAStartedRunsStep_promptly(
        kind: StoreKind
    ) async throws {
        guard let fresh = try await freshStore(kind, Waits.self) else { return }
        defer { fresh.close() }
        let runner = fresh.store
        let other = try await fresh.place.open()
        defer { other.close() }
        let tag = "\(kind)-started-waits"
        let run = try await runner.start(Waits.self, id: "s", input: tag)
        #expect(await eventually { Probe.counter.count("\(tag)/wait") == 1 })
        try await other.cancel(runID: "s")
        #expect(await eventually(seconds: 8) { Self.cancelled.withLock { $0.contains(tag) } })
        #expect("\(await terminalState(of: run))".hasPrefix("cancelled"))
        #expect(try await other.runs().first?.state == .cancelled)
    }
}
