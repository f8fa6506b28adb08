import CommandDurable
import CommandDurablePostgres
import CommandTestSupport
import Dispatch
import Foundation
import Testing

/// Bad input gets a clear error and loses nothing; handles to runs recorded elsewhere; each request of
/// the store's thread answered once.
@Suite struct DurableInputTests {
    struct Ids: DurableWorkflow {
        static let name = "ids"
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            flow.step(input) { _ in Command.just(1) }
        }
    }

    @Test(arguments: ["", "step\0one", "odd/s"]) func aStepIDThatIsEmpty_holdsNUL_orASlash_isRefused(id: String)
        async throws
    {
        let store = try DurableStore.inMemory()
        defer { store.close() }
        try store.register(Ids.self)
        do {
            _ = try await store.start(Ids.self, id: "r", input: id)
            Issue.record("the step id \(String(reflecting: id)) was accepted")
        } catch let error as DurableError {
            guard case .invalidFlow(let workflow, let message) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(workflow == "ids" && message.contains(String(reflecting: id)), "\(message)")
        }
        #expect(try await store.runs().isEmpty)
    }

    @Test func aRunIDThatIsEmpty_orHoldsNUL_isRefused() async throws {
        let store = try DurableStore.inMemory()
        defer { store.close() }
        try store.register(Ids.self)
        for id in ["", "run\0two"] {
            await #expect(throws: DurableError.self) { try await store.start(Ids.self, id: id, input: "s") }
            await #expect(throws: DurableError.self) { try await store.enqueue(Ids.self, id: id, input: "s") }
        }
        #expect(try await store.runs().isEmpty)
        // A slash is fine in a run's id (a step's id after it holds none).
        #expect(try await store.start(Ids.self, id: "user/42", input: "s").value == 1)
    }

    @Test(arguments: StoreKind.allCases) func cancellingAnUnknownRun_throwsUnknownRun(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Ids.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        await #expect(throws: DurableError.unknownRun("typo")) { try await store.cancel(runID: "typo") }
        #expect(try await store.start(Ids.self, id: "done", input: "s").value == 1)
        try await store.cancel(runID: "done")  // known and ended: stays as it ended
        #expect(try await store.runs().first?.state == .completed)
    }

    @Test(arguments: [
        "postgres+asyncpg://app:S3cret@db.internal:5432/app", "mysql://app:S3cret@db.internal/app", "app-database",
    ])
    func aLocationThatIsNotPostgreSQLs_isRefused_withoutItsPassword(location: String) async throws {
        let refusal = await storageMessage { try await DurableStore(postgres: location) }
        let message = try #require(refusal.message, "\(location): \(refusal.other)")
        #expect(message.contains("not a PostgreSQL location"), "\(message)")
        #expect(!message.contains("S3cret"), "\(message)")
    }

    struct Renamed: DurableWorkflow {
        static let name = "renamed"
        static func build(_ flow: DurableFlow, input: Bool) throws -> DurableStep<Int> {
            let first = flow.step(input ? "first" : "first-renamed") { _ in Command.just(1) }
            return flow.step("second", after: first) { _, value in
                Command<Int> { result in
                    Probe.held.withLock { $0["renamed/second"] = result }
                    return nil
                }
            }
        }
    }

    /// A run failed by `workflowChanged` is recorded with why (it was recorded with an empty error).
    @Test func aRunFailedByAChangedWorkflow_isRecordedWithWhy() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        do {
            let store = try DurableStore(path: folder.file())
            try store.register(Renamed.self)
            _ = try await store.start(Renamed.self, id: "w", input: true)
            #expect(await eventually { Probe.held.withLock { $0["renamed/second"] } != nil })
            store.close()
        }
        // Opened again with a build that no longer makes "first" for this input... which is recorded.
        let store = try DurableStore(path: folder.file())
        defer { store.close() }
        try store.register(Renamed.self)
        try await DurableMeasurements.execute("UPDATE runs SET input = CAST('false' AS BLOB)", on: store)
        let report = try await store.resumeUnfinished()
        #expect(report.resumed.isEmpty && report.notResumed.map(\.run) == ["w"])
        let record = try #require(try await store.runs().first)
        #expect(record.state == .failed)
        #expect(record.error?.contains("no longer makes") == true, "\(String(describing: record.error))")
        Probe.held.withLock { $0.removeValue(forKey: "renamed/second") }?.succeed(0)
    }

    /// `run(_:id:)`: a handle to a run recorded by another store (ended, or going on), without its input.
    @Test(arguments: StoreKind.allCases) func aRunHandle_followsARunStartedElsewhere(kind: StoreKind) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let tag = "\(kind)-handle"
        let starter = try await place.open()
        defer { starter.close() }
        let follower = try await place.open()
        defer { follower.close() }
        try starter.register(SideStep.self)
        try follower.register(SideStep.self)
        #expect(try await follower.run(SideStep.self, id: "nobody") == nil)
        await #expect(throws: DurableError.unknownWorkflow("ids")) { try await follower.run(Ids.self, id: "h") }
        _ = try await starter.start(SideStep.self, id: "h", input: tag)
        let followed = try #require(try await follower.run(SideStep.self, id: "h"))
        #expect(await eventually { Probe.held.withLock { $0["\(tag)/s"] } != nil })
        Probe.held.withLock { $0.removeValue(forKey: "\(tag)/s") }?.succeed(7)
        #expect(try await followed.value == 11)
        // Ended: the recorded value, nothing run again.
        #expect(try await follower.run(SideStep.self, id: "h")?.value == 11)
        #expect(Probe.counter.count("\(tag)/c") == 1)
    }

    /// A batch run again after its commit was lost (a read and a write in it) answers each request once:
    /// the read, answered before the writes began, is neither run nor answered again.
    @Test func aBatchRunAgain_answersEachRequestOnce() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try DurableStore(path: folder.file())
        defer { store.close() }
        let thread = try #require(DurableMeasurements.thread(of: store))
        let gate = DispatchSemaphore(value: 0)
        let holding = Checkpoint()
        // Holds the store's thread (its own thread: nothing else waits) until both requests are queued:
        // they are then taken together, in one batch.
        let gateRuns = Locked(0)
        thread.submit(
            write: false, hop: false,
            { _ in
                // Run once; a second run (the defect) must not wait again.
                guard
                    gateRuns.withLock({ runs -> Int in
                        runs += 1
                        return runs
                    }) == 1
                else { return }
                holding.fulfill()
                gate.wait()
            }, completion: { _ in })
        #expect(await holding.wait())
        thread.loseTheNextMixedCommit()
        let reads = Locked(0)
        let writes = Locked(0)
        let written = Checkpoint()
        thread.submit(
            write: false, hop: false, { connection in try connection.query("SELECT count(*) FROM runs") },
            completion: { _ in reads.withLock { $0 += 1 } })
        thread.submit(
            write: true, hop: false,
            { connection in try connection.query("UPDATE runs SET updated = 0 WHERE id = 'none'") },
            completion: { result in
                #expect((try? result.get()) != nil)
                writes.withLock { $0 += 1 }
                written.fulfill()
            })
        gate.signal()
        #expect(await written.wait())
        #expect(thread.lostCommits == 1)  // the batch's commit was lost, and the batch run again
        // Whatever the thread answers next comes after a second answer would have.
        let flushed = Checkpoint()
        thread.submit(write: false, hop: false, { _ in }, completion: { _ in flushed.fulfill() })
        #expect(await flushed.wait())
        #expect(reads.withLock { $0 } == 1)
        #expect(writes.withLock { $0 } == 1)
        #expect(gateRuns.withLock { $0 } == 1)
    }

    /// A directory, a URL that is not a file's, a folder that does not exist, and (where this process is
    /// not root, which writes anything) a read-only file: a clear `.storage`, and nothing created.
    @Test func aPathThatCannotHoldAStore_isRefused_creatingNothing() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        func refusal(_ open: () throws -> DurableStore) async -> String? {
            let refused = await storageMessage { try open() }
            return refused.message ?? refused.other
        }
        let directory = await refusal { try DurableStore(path: folder.url.path) }
        #expect(directory?.contains("is a directory") == true, "\(String(describing: directory))")
        let remote = await refusal { try DurableStore(path: URL(string: "https://example.com/x.sqlite")!) }
        #expect(remote?.contains("is not a file URL") == true, "\(String(describing: remote))")
        #expect(!FileManager.default.fileExists(atPath: "/x.sqlite"))
        let missing = await refusal { try DurableStore(path: folder.file("no/such/folder.sqlite")) }
        #expect(missing?.contains("does not exist") == true, "\(String(describing: missing))")
        if getuid() != 0 {
            let path = folder.file("read-only.sqlite")
            try DurableStore(path: path).close()
            try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: path)
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            let readOnly = await refusal { try DurableStore(path: path) }
            #expect(readOnly?.contains("read-only") == true, "\(String(describing: readOnly))")
            #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        }
    }
}

/// Steps written as `async` closures, beside command steps (a `Command<Void>` step still runs its
/// command: the `async` Void form does not swallow it).
@Suite struct DurableAsyncStepTests {
    struct User: Codable, Sendable, Equatable { var id: Int; var name: String }

    struct Fetch: DurableWorkflow {
        static let name = "async-steps"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<String> {
            let fetched = flow.step("fetch") { context async throws -> User in
                try await Task.sleep(nanoseconds: 1_000_000)
                return User(id: input, name: "user-\(input)-attempt-\(context.attempt)")
            }
            let noted = flow.step("note", after: fetched) { _, user in
                Command<Void> { result in
                    Probe.counter.hit("async-steps/note-\(user.id)")
                    result.succeed()
                    return nil
                }
            }
            flow.step("side", after: fetched) { _, user async throws in
                Probe.counter.hit("async-steps/side-\(user.id)")
            }
            // A one-expression closure that returns a command: the command form, its command run.
            flow.step("one-liner", after: fetched) { _, user in
                DurableAsyncStepTests.hit("async-steps/one-liner-\(user.id)")
            }
            return flow.step("greet", after: fetched, noted) { _, user, _ async throws -> String in
                "hello \(user.name)"
            }
        }
    }

    static func hit(_ key: String) -> Command<Void> {
        Command<Void> { result in
            Probe.counter.hit(key)
            result.succeed()
            return nil
        }
    }

    @Test func asyncClosureSteps_runAndRecordTheirValues() async throws {
        let store = try DurableStore.inMemory()
        defer { store.close() }
        try store.register(Fetch.self)
        #expect(try await store.start(Fetch.self, id: "a", input: 3).value == "hello user-3-attempt-1")
        #expect(Probe.counter.count("async-steps/note-3") == 1)
        #expect(Probe.counter.count("async-steps/side-3") == 1)
        #expect(Probe.counter.count("async-steps/one-liner-3") == 1)
        let record = try #require(try await store.runs().first)
        #expect(record.state == .completed && record.steps.allSatisfy { $0.state == .completed })
    }
}

/// `runs(_:)`: filters that combine, pages, and the recorded values.
@Suite struct DurableRecordsTests {
    @Test(arguments: StoreKind.allCases) func filtersCombine_pagesFollowEachOther_andRecordsCarryValues(kind: StoreKind)
        async throws
    {
        guard let fresh = try await freshStore(kind, Sum.self, DurableInputTests.Ids.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        for index in 0..<5 {
            #expect(
                try await store.start(Sum.self, id: "sum-\(index)", input: .init(tag: "\(kind)-records")).value == 5)
        }
        #expect(try await store.start(DurableInputTests.Ids.self, id: "ids-0", input: "only").value == 1)
        let failed = try await store.enqueue(Sum.self, id: "sum-queued", input: .init(tag: "\(kind)-queued"))
        try await store.cancel(runID: failed.id)

        let sums = try await store.runs(.init(workflow: "sum", states: [.completed]))
        #expect(sums.map(\.id) == (0..<5).map { "sum-\($0)" })
        let first = try await store.runs(.init(workflow: "sum", states: [.completed], limit: 2))
        let second = try await store.runs(.init(workflow: "sum", states: [.completed], limit: 2, after: first.last?.id))
        let third = try await store.runs(.init(workflow: "sum", states: [.completed], limit: 2, after: second.last?.id))
        #expect((first + second + third).map(\.id) == sums.map(\.id))
        #expect(third.count == 1)
        let now = Date()
        #expect(
            try await store.runs(
                .init(states: [.cancelled], ended: now.addingTimeInterval(-60)..<now.addingTimeInterval(60))
            ).map(\.id) == ["sum-queued"])
        #expect(try await store.runs(.init(created: now.addingTimeInterval(60)..<now.addingTimeInterval(120))).isEmpty)
        #expect(try await store.runs(.init(workflow: "ids", states: [.failed])).isEmpty)

        let record = try #require(sums.first)
        let input = try JSONDecoder().decode(Sum.Input.self, from: try #require(record.input))
        #expect(input.tag == "\(kind)-records")
        #expect(try JSONDecoder().decode(Int.self, from: try #require(record.output)) == 5)
        #expect(try record.steps.map { try JSONDecoder().decode(Int.self, from: try #require($0.value)) } == [2, 3, 5])
        #expect(try await store.runs(.init(states: [.cancelled])).first?.output == nil)
    }
}
