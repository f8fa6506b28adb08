import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// The rules of durable runs, each on a real store (a file, or memory where a file changes nothing).
@Suite struct DurableRuleTests {
    @Test(arguments: StoreKind.allCases) func start_runsTheSteps_recordsEach_andSendsTheRunsValue(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        try store.register(Sum.self)
        let run = try await store.start(Sum.self, id: "r1", input: .init(tag: "\(kind)-start"))
        #expect(try await run.value == 5)
        let records = try await store.runs()
        #expect(records.count == 1)
        let record = try #require(records.first)
        #expect(record.id == "r1" && record.workflow == "sum" && record.state == .completed)
        #expect(record.steps.map(\.id) == ["a", "b", "sum"])
        #expect(record.steps.allSatisfy { $0.state == .completed && $0.attempts == 1 && $0.ended != nil })
        #expect(Probe.counter.count("\(kind)-start/sum") == 1)
    }

    @Test(arguments: StoreKind.allCases) func theSameID_keep_givesThatRun_andFail_throwsRunExists(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        try store.register(Sum.self)
        let first = try await store.start(Sum.self, id: "same", input: .init(tag: "\(kind)-keep"))
        #expect(try await first.value == 5)
        let again = try await store.start(Sum.self, id: "same", input: .init(tag: "\(kind)-keep"))
        #expect(try await again.value == 5)
        #expect(Probe.counter.count("\(kind)-keep/sum") == 1)  // the recorded value, nothing run again
        await #expect(throws: DurableError.runExists("same")) {
            try await store.start(Sum.self, id: "same", input: .init(tag: "\(kind)-keep"), ifExists: .fail)
        }
        #expect(try await store.runs().count == 1)
    }

    struct Throwing: DurableWorkflow {
        static let name = "throwing"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
            throw TestFailure(message: "no flow for \(input)")
        }
    }

    struct TwoIDs: DurableWorkflow {
        static let name = "two-ids"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
            _ = flow.step("x") { _ in Command.just(1) }
            return flow.step("x") { _ in Command.just(2) }
        }
    }

    @Test(arguments: StoreKind.allCases) func aBuildThatThrows_orTwoStepsWithOneID_recordNothing(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        try store.register(Throwing.self)
        try store.register(TwoIDs.self)
        await #expect(throws: TestFailure.self) { try await store.start(Throwing.self, id: "t", input: 1) }
        do {
            _ = try await store.start(TwoIDs.self, id: "d", input: 1)
            Issue.record("two steps with one id were accepted")
        } catch let error as DurableError {
            guard case .invalidFlow(let workflow, let message) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(workflow == "two-ids" && message.contains("'x'"))
        }
        #expect(try await store.runs().isEmpty)
    }

    @Test(arguments: StoreKind.allCases) func registration_unknownAndDuplicateWorkflows_throw(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        await #expect(throws: DurableError.unknownWorkflow("sum")) {
            try await store.start(Sum.self, id: "u", input: .init(tag: "u"))
        }
        try store.register(Sum.self)
        #expect(throws: DurableError.duplicateWorkflow("sum")) { try store.register(Sum.self) }
    }

    struct Flaky: DurableWorkflow {
        static let name = "flaky"
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            flow.step("flaky", retry: .attempts(3)) { context in
                Probe.flaky(input, context)
            }
        }
    }

    @Test(arguments: StoreKind.allCases) func aFailure_isRecorded_andRetried_withTheAttemptCounted(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        try store.register(Flaky.self)
        Probe.failuresLeft.withLock { $0["\(kind)-retry"] = 2 }
        let run = try await store.start(Flaky.self, id: "f", input: "\(kind)-retry")
        #expect(try await run.value == 3)  // attempts 1 and 2 failed, 3 succeeded
        let step = try #require(try await store.runs().first?.steps.first)
        #expect(step.attempts == 3 && step.state == .completed)
        #expect(step.lastError?.contains("flaky attempt 2") == true)
        #expect(step.lastError?.contains("TestFailure") == true)
    }

    @Test(arguments: StoreKind.allCases) func theLastFailure_failsTheRun_withTheErrorItself_thenStepFailedFromTheRecord(
        kind: StoreKind
    ) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        try store.register(Flaky.self)
        Probe.failuresLeft.withLock { $0["\(kind)-fails"] = 10 }
        let run = try await store.start(Flaky.self, id: "x", input: "\(kind)-fails")
        do {
            _ = try await run.value
            Issue.record("the run did not fail")
        } catch let error as TestFailure {
            #expect(error.message == "flaky attempt 3")
        }
        let record = try #require(try await store.runs().first)
        #expect(record.state == .failed && record.steps.first?.state == .failed)
        let again = try await store.start(Flaky.self, id: "x", input: "\(kind)-fails")
        do {
            _ = try await again.value
            Issue.record("the recorded failure was not thrown")
        } catch let error as DurableError {
            guard case .stepFailed(let step, let message) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(step == "flaky" && message.contains("flaky attempt 3"))
        }
        #expect(Probe.counter.count("\(kind)-fails/flaky") == 3)
    }

    struct Hanging: DurableWorkflow {
        static let name = "hanging"
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            let first = flow.step("first") { _ in Probe.value("\(input)/first", 1) }
            return flow.step("second", after: first) { _, value in
                Command<Int> { result in
                    Probe.counter.hit("\(input)/second")
                    Probe.held.withLock { $0[input] = result }
                    return nil
                }
            }
        }
    }

    @Test(arguments: StoreKind.allCases) func cancel_isRecorded_stopsTheSteps_andTheRunIsNeverResumed(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        try store.register(Hanging.self)
        let run = try await store.start(Hanging.self, id: "c", input: "\(kind)-cancel")
        let running = Checkpoint()
        Task {
            while Probe.held.withLock({ $0["\(kind)-cancel"] }) == nil { await Task.yield() }
            running.fulfill()
        }
        #expect(await running.wait())
        run.cancel()
        #expect("\(await terminalState(of: run))".hasPrefix("cancelled"))
        store.close()
        let reopened = try await place.open()
        try reopened.register(Hanging.self)
        #expect(try await reopened.runs().first?.state == .cancelled)
        let report = try await reopened.resumeUnfinished()
        #expect(report.resumed.isEmpty)
        #expect(Probe.counter.count("\(kind)-cancel/second") == 1)
    }
}

/// What the records say at each moment a step can observe.
@Suite(.serialized) struct DurableOrderingTests {
    /// The store the workflow below reads (one test uses it).
    static let store = Locked<DurableStore?>(nil)
    static let seen = Locked<[DurableRunState]>([])

    struct Observed: DurableWorkflow {
        static let name = "observed"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
            let first = flow.step("first") { _ in Command.just(input) }
            return flow.step("second", after: first) { _, value in
                // Run once `first` ended: its completion must be committed by now.
                Command {
                    let store = DurableOrderingTests.store.withLock { $0 }
                    let state = try? await store?.runs().first?.steps.first?.state
                    DurableOrderingTests.seen.withLock { $0.append(state ?? .pending) }
                    return value * 2
                }
            }
        }
    }

    @Test(arguments: StoreKind.allCases) func aStepsCompletion_isCommitted_beforeTheStepAfterItStarts_andBeforeTheValue(
        kind: StoreKind
    ) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        try store.register(Observed.self)
        Self.seen.withLock { $0 = [] }
        Self.store.withLock { $0 = store }
        defer { Self.store.withLock { $0 = nil } }
        let run = try await store.start(Observed.self, id: "o", input: 21)
        #expect(try await run.value == 42)
        #expect(Self.seen.withLock { $0 } == [.completed])
        // Before `value` returned, the run's end was committed too.
        #expect(try await store.runs().first?.state == .completed)
    }
}

/// SwiftQueue's reported persister bugs, as regression tests: a cancelled job back after a restart
/// (#281), pending work not run at the next launch (#360), finished jobs restored and run again after a
/// restart (#367, #375).
@Suite struct SwiftQueueRegressionTests {
    @Test(arguments: StoreKind.allCases) func aFinishedRun_isNeitherResumedNorRunAgain_afterARestart(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        do {
            let first = try await place.open()
            try first.register(Sum.self)
            #expect(try await first.start(Sum.self, id: "done", input: .init(tag: "\(kind)-restart")).value == 5)
            first.close()
        }
        let second = try await place.open()
        try second.register(Sum.self)
        #expect(try await second.resumeUnfinished().resumed.isEmpty)
        #expect(try await second.start(Sum.self, id: "done", input: .init(tag: "\(kind)-restart")).value == 5)
        #expect(Probe.counter.count("\(kind)-restart/sum") == 1)
    }

    @Test(arguments: StoreKind.allCases) func aCancelledRun_doesNotComeBack_afterARestart(kind: StoreKind) async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        do {
            let first = try await place.open()
            try first.register(DurableRuleTests.Hanging.self)
            _ = try await first.start(DurableRuleTests.Hanging.self, id: "gone", input: "\(kind)-swiftqueue-cancel")
            try await first.cancel(runID: "gone")
            first.close()
        }
        let second = try await place.open()
        try second.register(DurableRuleTests.Hanging.self)
        #expect(try await second.resumeUnfinished().resumed.isEmpty)
        #expect(try await second.runs(.unfinished).isEmpty)
        #expect(try await second.runs(.state(.cancelled)).map(\.id) == ["gone"])
    }

    @Test(arguments: StoreKind.allCases) func pendingWork_runsAtTheNextLaunch(kind: StoreKind) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        do {
            // Recorded, then the process "ends" before anything ran: the store closes at once.
            let first = try await place.open(lease: .milliseconds(100))
            try first.register(Sum.self)
            first.close()
        }
        // A short lease: on a server's store, owners are judged by their leases only.
        let second = try await place.open(lease: .milliseconds(100))
        try second.register(Sum.self)
        _ = try await second.start(Sum.self, id: "later", input: .init(tag: "\(kind)-launch"))
        second.close()
        let third = try await place.open(lease: .milliseconds(100))
        try third.register(Sum.self)
        let report = try await third.resumeUnfinished()
        let run = try await third.start(Sum.self, id: "later", input: .init(tag: "\(kind)-launch"))
        #expect(try await run.value == 5)
        #expect(report.resumed.count + (try await third.runs(.state(.completed)).count) >= 1)
        #expect(try await third.runs().first?.state == .completed)
    }
}

/// What a run shows while and after it runs, and what a store keeps.
@Suite struct DurableVisibilityTests {
    @Test(arguments: StoreKind.allCases) func aRunsProgress_addsUpItsSteps_andGraphReportDrawsThem(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        try store.register(Sum.self)
        let run = try await store.start(Sum.self, id: "p", input: .init(tag: "\(kind)-progress"))
        #expect(try await run.value == 5)
        #expect(run.fractionCompleted == 1)
        let dot = GraphReport.dot(run.steps)
        #expect(dot.contains("sum/p/a") && dot.contains("sum/p/b") && dot.contains("sum/p/sum"))
        #expect(run.steps.count == 3)
    }

    @Test(arguments: StoreKind.allCases) func prune_deletesRunsThatEndedBefore_andKeepsTheRest(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        try store.register(Sum.self)
        try store.register(DurableRuleTests.Hanging.self)
        _ = try await store.start(Sum.self, id: "old", input: .init(tag: "\(kind)-prune")).value
        _ = try await store.start(DurableRuleTests.Hanging.self, id: "running", input: "\(kind)-prune")
        #expect(try await store.prune(endedBefore: Date().addingTimeInterval(-3_600)) == 0)
        #expect(try await store.prune(endedBefore: Date().addingTimeInterval(1)) == 1)
        #expect(try await store.runs().map(\.id) == ["running"])
        #expect(try await store.runs(.workflow("sum")).isEmpty)
        #expect(try await store.runs(.unfinished).map(\.id) == ["running"])
        try await store.cancel(runID: "running")
    }
}

/// Rule 8: SQLite runs on the store's own thread (debug builds assert it at every call, so every test
/// here checks it), and the records of steps that end together share a commit.
@Suite struct DurableGroupCommitTests {
    struct Wide: DurableWorkflow {
        static let name = "wide"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
            let steps = (0..<input).map { index in flow.step("s\(index)") { _ in Command.just(index) } }
            return flow.step("end", waitingFor: steps) { _ in Command.just(input) }
        }
    }

    @Test(arguments: StoreKind.allCases) func stepsThatEndTogether_shareCommits(kind: StoreKind) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        defer { store.close() }
        try store.register(Wide.self)
        let before = DurableMeasurements.commits(of: store)
        #expect(try await store.start(Wide.self, id: "w", input: 2_000).value == 2_000)
        let commits = DurableMeasurements.commits(of: store) - before
        // 2,001 steps, each claimed and completed: 4,002 writes, in at least 5x fewer commits.
        #expect(commits > 0 && commits * 5 <= 4_002, "\(commits) commits")
        print("group commit: \(commits) commits for 2,001 steps")
    }
}
