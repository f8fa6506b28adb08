import CommandDurable
import CommandDurablePostgres
import CommandDurablePostgresTesting
import CommandTestSupport
import Foundation
import Testing

/// A database that goes away: the store's awaits never hold a thread of the concurrency pool, and an
/// outage of any length fails no run.
@Suite struct DurableOutageTests {
    /// `first`, four steps after it (each takes 20 ms), and a total: the value is 4 * input + 6.
    struct Fan: DurableWorkflow {
        static let name = "outage-fan"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
            let first = flow.step("first") { _ in Probe.value("outage/first", input) }
            let fan = (0..<4).map { index in
                flow.step("f\(index)", after: first) { _, value in
                    Command<Int> { result in
                        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) {
                            result.succeed(value + index)
                        }
                        return nil
                    }
                }
            }
            return flow.step("total", after: fan[0], fan[1], fan[2], fan[3]) { _, a, b, c, d in
                Command.just(a + b + c + d)
            }
        }
    }

    /// Whether the long (60 s) outage runs: not in the sanitizers' short form.
    static var longOutage: Bool { ProcessInfo.processInfo.environment["AWESOMECOMMAND_STRESS"] != "sanitizer" }

    /// The server stopped for `seconds` under two workers (two stores of their own, concurrency 4 each)
    /// working 60 runs: every run completes with its value, every step recorded completed.
    @Test(arguments: [15, 60]) func anOutage_underWorkers_failsNoRun(seconds: Int) async throws {
        guard try await SharedPostgres.available() != nil else { return }
        if seconds > 15 && !Self.longOutage { return }
        // A server of its own: stopping it would cut the other tests' connections.
        let server = try await ThrowawayPostgres.start()
        defer { server.stop() }
        let url = try await server.makeDatabase()
        let web = try await DurableStore(postgres: url)
        defer { web.close() }
        try web.register(Fan.self)
        var workers: [(DurableStore, DurableWorker)] = []
        for _ in 0..<2 {
            let store = try await DurableStore(postgres: url)
            try store.register(Fan.self)
            workers.append((store, try store.work(concurrency: 4)))
        }
        var runs: [DurableRun<Int>] = []
        for index in 0..<60 { runs.append(try await web.enqueue(Fan.self, id: "o-\(index)", input: index)) }
        // The outage lands while the workers work: after the fifth run ended.
        let ended = Locked(0)
        let collected = Task { () -> [Result<Int, any Error>] in
            var values: [Result<Int, any Error>] = []
            for run in runs {
                do { values.append(.success(try await run.value)) } catch { values.append(.failure(error)) }
                ended.withLock { $0 += 1 }
            }
            return values
        }
        #expect(await eventually { ended.withLock { $0 } >= 5 })
        try await server.halt()
        try await Task.sleep(for: .seconds(seconds))  // the outage itself, not a wait for an event
        try await server.startAgain()
        let values = await collected.value
        for (index, value) in values.enumerated() {
            switch value {
            case .success(let total): #expect(total == 4 * index + 6)
            case .failure(let error): Issue.record("run o-\(index) failed: \(error)")
            }
        }
        let records = try await web.runs()
        #expect(records.count == 60)
        #expect(records.allSatisfy { $0.state == .completed }, "\(records.filter { $0.state != .completed })")
        #expect(records.allSatisfy { $0.steps.count == 6 && $0.steps.allSatisfy { $0.state == .completed } })
        for (store, worker) in workers {
            await worker.stop()
            store.close()
        }
    }

    /// 1,000 `await store.start` from tasks while the database is unreachable for 2 s: a heartbeat task
    /// on the same pool ticks every 10 ms throughout (the worst lateness is printed); every start returns
    /// once the server is back.
    @Test func awaitsDuringAnOutage_holdNoThreadOfThePool() async throws {
        guard try await SharedPostgres.available() != nil else { return }
        let server = try await ThrowawayPostgres.start()
        defer { server.stop() }
        let url = try await server.makeDatabase()
        let store = try await DurableStore(postgres: url)
        defer { store.close() }
        try store.register(Ids.self)
        try await server.halt()
        let clock = ContinuousClock()
        let beating = Locked(true)
        // Each tick's time (the heartbeat's own record: read once it stopped).
        let heartbeat = Task { () -> [ContinuousClock.Instant] in
            var ticks: [ContinuousClock.Instant] = [clock.now]
            while beating.withLock({ $0 }) {
                try? await Task.sleep(for: .milliseconds(10))
                ticks.append(clock.now)
            }
            return ticks
        }
        let started = Locked(0)
        let starts = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<1_000 {
                    group.addTask {
                        _ = try await store.start(Ids.self, id: "b-\(index)", input: "s")
                        started.withLock { $0 += 1 }
                    }
                }
                try await group.waitForAll()
            }
        }
        let outageBegan = clock.now
        try await Task.sleep(for: .seconds(2))  // the outage itself
        let outageEnded = clock.now
        #expect(started.withLock { $0 } == 0)
        try await server.startAgain()
        try await starts.value
        beating.withLock { $0 = false }
        let ticks = await heartbeat.value
        func lateness(_ window: ClosedRange<ContinuousClock.Instant>) -> (ticks: Int, worst: Duration) {
            let inside = ticks.filter { window.contains($0) }
            let worst = zip(inside, inside.dropFirst()).map { $1 - $0 - .milliseconds(10) }.max() ?? .seconds(2)
            return (inside.count, worst)
        }
        let outage = lateness(outageBegan...outageEnded)
        let whole = lateness(outageBegan...clock.now)
        print(
            "heartbeat: \(outage.ticks) ticks in the 2 s outage, worst \(outage.worst) late; "
                + "worst \(whole.worst) late until the 1,000 starts returned")
        // 1,000 awaits that each held a pool thread would stop the heartbeat for the whole outage (no tick
        // at all). Alone: 196 ticks in the outage, the worst 6 ms late, and 42-76 ms late at worst until the
        // starts returned (the 1,000 runs launched then are work on the pool), under the issue's 100 ms;
        // beside the 447 other tests of the suite on 2 cores, time slicing made ticks 134-511 ms late: the
        // assertions are what tells a held pool from a busy machine.
        #expect(outage.ticks >= 20, "the heartbeat stopped during the outage: \(outage.ticks) ticks")
        #expect(outage.worst <= .seconds(1), "a heartbeat tick was \(outage.worst) late during the outage")
        #expect(started.withLock { $0 } == 1_000)
        #expect(try await store.runs().count == 1_000)
    }

    /// A task cancelled while its `start` waits for a lost connection stops waiting at once; its request
    /// never runs.
    @Test func aCancelledAwait_stopsWaiting_andItsRequestNeverRuns() async throws {
        guard try await SharedPostgres.available() != nil else { return }
        let server = try await ThrowawayPostgres.start()
        defer { server.stop() }
        let url = try await server.makeDatabase()
        let store = try await DurableStore(postgres: url)
        defer { store.close() }
        try store.register(Ids.self)
        try await server.halt()
        let waiting = Task { try await store.start(Ids.self, id: "never", input: "s") }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        try await server.startAgain()
        #expect(try await store.start(Ids.self, id: "after", input: "s").value == 1)
        #expect(try await store.runs().map(\.id) == ["after"])
    }

    /// Past the store's patience without a connection, an await throws `.storage` naming the place.
    @Test func anAwait_pastItsPatience_throwsStorageNamingThePlace() async throws {
        guard try await SharedPostgres.available() != nil else { return }
        let server = try await ThrowawayPostgres.start()
        defer { server.stop() }
        let url = try await server.makeDatabase()
        let store = try await DurableStore(postgres: url, patience: .milliseconds(300))
        defer { store.close() }
        try store.register(Ids.self)
        try await server.halt()
        do {
            _ = try await store.start(Ids.self, id: "late", input: "s")
            Issue.record("the start returned without a server")
        } catch let error as DurableError {
            guard case .storage(let message) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(message.contains("PostgreSQL at 127.0.0.1:\(server.port)"), "\(message)")
            #expect(!message.contains(server.password), "\(message)")
        }
        try await server.startAgain()
    }

    struct Ids: DurableWorkflow {
        static let name = "outage-ids"
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            flow.step(input) { _ in Command.just(1) }
        }
    }
}
