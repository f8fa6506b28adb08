import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// Resume in one process: a store closed while a step runs (its lease is never renewed again, as if its
/// process had stalled), then the same file opened again.
@Suite struct DurableResumeTests {
    /// Waits until `step` of `input` is running (its command was made).
    private func running(_ input: String) async -> Bool {
        let seen = Checkpoint()
        Task {
            while Probe.held.withLock({ $0[input] }) == nil { try? await Task.sleep(nanoseconds: 1_000_000) }
            seen.fulfill()
        }
        return await seen.wait()
    }

    @Test(arguments: StoreKind.allCases) func resume_skipsWhatCompleted_andRunsAgainWhatWasBegun_withAttemptPlusOne(
        kind: StoreKind
    ) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let first = try await place.open(lease: .milliseconds(300))
        try first.register(DurableRuleTests.Hanging.self)
        _ = try await first.start(DurableRuleTests.Hanging.self, id: "h", input: "\(kind)-resume")
        #expect(await running("\(kind)-resume"))
        first.close()  // the step it holds is never renewed nor completed here again
        Probe.held.withLock { $0["\(kind)-resume"] = nil }

        let second = try await place.open(lease: .milliseconds(300))
        try second.register(DurableRuleTests.Hanging.self)
        let report = try await second.resumeUnfinished()
        #expect(report.resumed == ["h"])
        // The second step is taken over once the first store's lease ran out; the first step is not run again.
        #expect(await running("\(kind)-resume"))
        Probe.held.withLock { $0["\(kind)-resume"] }?.succeed(42)
        let run = try await second.start(DurableRuleTests.Hanging.self, id: "h", input: "\(kind)-resume")
        #expect(try await run.value == 42)
        #expect(Probe.counter.count("\(kind)-resume/first") == 1)
        #expect(Probe.counter.count("\(kind)-resume/second") == 2)
        let steps = try #require(try await second.runs().first?.steps)
        #expect(steps.map(\.attempts) == [1, 2])
        #expect(steps.allSatisfy { $0.state == .completed })
    }

    struct V2: DurableWorkflow {
        static let name = "hanging"  // the same name, other step ids
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            let first = flow.step("first") { _ in Probe.value("\(input)/first", 1) }
            return flow.step("renamed", after: first) { _, value in Command.just(value) }
        }
    }

    @Test(arguments: StoreKind.allCases) func aRecordedStepTheWorkflowNoLongerMakes_failsTheRun_recorded(
        kind: StoreKind
    ) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let first = try await place.open(lease: .milliseconds(100))
        try first.register(DurableRuleTests.Hanging.self)
        _ = try await first.start(DurableRuleTests.Hanging.self, id: "w", input: "\(kind)-changed")
        #expect(await running("\(kind)-changed"))
        first.close()

        let second = try await place.open(lease: .milliseconds(100))
        try second.register(V2.self)
        let report = try await second.resumeUnfinished()
        #expect(report.resumed.isEmpty)
        #expect(report.notResumed.first?.run == "w")
        #expect(report.notResumed.first?.reason.contains("'second'") == true)
        let record = try #require(try await second.runs().first)
        #expect(record.state == .failed)
        #expect(record.steps.map(\.id) == ["first", "second"])  // nothing deleted
        do {
            _ = try await second.start(V2.self, id: "w", input: "\(kind)-changed").value
            Issue.record("the recorded failure was not thrown")
        } catch let error as DurableError {
            #expect(error == .workflowChanged(run: "w", step: "second"))
        }
    }

    struct OtherInput: DurableWorkflow {
        static let name = "hanging"
        struct Input: Codable, Sendable { var number: Int }
        static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Int> {
            flow.step("first") { _ in Command.just(input.number) }
        }
    }

    @Test(arguments: StoreKind.allCases) func anInputThatNoLongerDecodes_failsTheRun_recordedByResume(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let first = try await place.open(lease: .milliseconds(100))
        try first.register(DurableRuleTests.Hanging.self)
        _ = try await first.start(DurableRuleTests.Hanging.self, id: "i", input: "\(kind)-decoding")
        #expect(await running("\(kind)-decoding"))
        first.close()

        let second = try await place.open()
        try second.register(OtherInput.self)
        let report = try await second.resumeUnfinished()
        #expect(report.notResumed.map(\.run) == ["i"])
        let record = try #require(try await second.runs().first)
        #expect(record.state == .failed)
        #expect(record.error?.isEmpty == false)
    }

    /// "first" recorded a number; V2's "first" makes a String: its recorded value no longer decodes.
    struct ValueChanged: DurableWorkflow {
        static let name = "value-changed"
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            let first = flow.step("first") { _ in Command.just(1) }
            return flow.step("second", after: first) { _, _ in
                Command<Int> { result in
                    Probe.held.withLock { $0["\(input)/second"] = result }
                    return nil
                }
            }
        }
    }

    struct ValueChangedV2: DurableWorkflow {
        static let name = "value-changed"
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            let first = flow.step("first") { _ in Command.just("one") }
            return flow.step("second", after: first) { _, _ in Probe.value("\(input)/second-v2", 2) }
        }
    }

    /// A run whose recorded value no longer decodes is not reported resumed: it fails at resume, with
    /// `decoding` naming the step, recorded; nothing runs.
    @Test(arguments: StoreKind.allCases) func aRecordedValueThatNoLongerDecodes_failsTheRunAtResume(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let tag = "\(kind)-value-changed"
        let first = try await place.open(lease: .milliseconds(100))
        try first.register(ValueChanged.self)
        _ = try await first.start(ValueChanged.self, id: "v", input: tag)
        #expect(await eventually { Probe.held.withLock { $0["\(tag)/second"] } != nil })
        first.close()

        let second = try await place.open()
        try second.register(ValueChangedV2.self)
        let report = try await second.resumeUnfinished()
        #expect(report.resumed.isEmpty)
        #expect(report.notResumed.map(\.run) == ["v"])
        #expect(report.notResumed.first?.reason.contains("step 'first'") == true, "\(report.notResumed)")
        let record = try #require(try await second.runs().first)
        #expect(record.state == .failed)
        #expect(Probe.counter.count("\(tag)/second-v2") == 0)
        Probe.held.withLock { $0.removeValue(forKey: "\(tag)/second") }?.succeed(0)
    }

    @Test(arguments: StoreKind.allCases) func aRunOfAWorkflowNotRegisteredHere_isLeftAsItIs(kind: StoreKind)
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let first = try await place.open(lease: .milliseconds(100))
        try first.register(DurableRuleTests.Hanging.self)
        _ = try await first.start(DurableRuleTests.Hanging.self, id: "n", input: "\(kind)-unregistered")
        #expect(await running("\(kind)-unregistered"))
        first.close()

        let second = try await place.open()
        let report = try await second.resumeUnfinished()
        #expect(report.resumed.isEmpty)
        #expect(report.notResumed.first?.reason.contains("not registered") == true)
        #expect(try await second.runs().first?.state == .running)
    }

    struct Unencodable: Codable, Sendable {
        func encode(to encoder: any Encoder) throws {
            throw EncodingError.invalidValue(0, .init(codingPath: [], debugDescription: "never encodes"))
        }
        init() {}
        init(from decoder: any Decoder) throws {}
    }

    struct BadValue: DurableWorkflow {
        static let name = "bad-value"
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Unencodable> {
            flow.step("bad", retry: .attempts(5)) { _ in Command.just(Unencodable()) }
        }
    }

    @Test(arguments: StoreKind.allCases) func aValueThatDoesNotEncode_failsTheStep_withTheEncodingError_recorded(
        kind: StoreKind
    )
        async throws
    {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        try store.register(BadValue.self)
        do {
            _ = try await store.start(BadValue.self, id: "b", input: 0).value
            Issue.record("an unencodable value was recorded")
        } catch is EncodingError {
        }
        let step = try #require(try await store.runs().first?.steps.first)
        #expect(step.state == .failed && step.attempts == 1)  // not retried: it would never encode
        #expect(step.lastError?.contains("never encodes") == true)
    }
}

/// Files that are not stores, or are stores of a newer schema: a clear error, the file untouched.
@Suite struct DurableStoreFileTests {
    private func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    @Test func aTextFile_isNotAStore_andIsLeftUntouched() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("notes.txt")
        try Data("shopping list: milk, eggs\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: DurableError.notAStore(path: path)) { try DurableStore(path: path) }
        #expect(bytes(path) == Data("shopping list: milk, eggs\n".utf8))
    }

    @Test func anotherDatabase_isNotAStore_andATruncatedStore_either() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        // A store of ours, truncated to half.
        let store = folder.file("cut.sqlite")
        do {
            let made = try DurableStore(path: store, durability: .normal)
            try made.register(Sum.self)
            _ = try await made.start(Sum.self, id: "t", input: .init(tag: "cut"))
            made.close()
        }
        try? FileManager.default.removeItem(atPath: store + "-wal")
        try? FileManager.default.removeItem(atPath: store + "-shm")
        let whole = try #require(bytes(store))
        let half = whole.prefix(whole.count / 2)
        var page = Data(half)
        // Keep the header but break the first page's contents.
        if page.count > 200 { page.replaceSubrange(100..<200, with: Data(repeating: 0xAB, count: 100)) }
        try page.write(to: URL(fileURLWithPath: store))
        #expect(throws: DurableError.notAStore(path: store)) { try DurableStore(path: store) }
        #expect(bytes(store) == page)
    }

    @Test func aNewerSchema_isRefused_andLeftUntouched() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("newer.sqlite")
        do { try DurableStore(path: path, durability: .normal).close() }
        try? FileManager.default.removeItem(atPath: path + "-wal")
        var header = try #require(bytes(path))
        // `PRAGMA user_version` is the big-endian 32-bit number at offset 60 of the header.
        header.replaceSubrange(60..<64, with: [0, 0, 0, 99])
        try header.write(to: URL(fileURLWithPath: path))
        #expect(throws: DurableError.newerSchema(found: 99, supported: 5)) { try DurableStore(path: path) }
        #expect(bytes(path) == header)
    }

    @Test func theErrors_nameTheFile_andSayWhatToDo() {
        let text = String(describing: DurableError.notAStore(path: "/tmp/x.sqlite"))
        #expect(text.contains("/tmp/x.sqlite") && text.contains("not changed"))
        #expect(String(describing: DurableError.workflowChanged(run: "r", step: "s")).contains("keep step ids"))
        #expect(String(describing: DurableError.unknownWorkflow("w")).contains("register"))
    }
}

/// Failures the store itself meets, and backoffs that outlive their process.
@Suite struct DurableStorageFailureTests {
    @Test func aFullDisk_whenAStepEnds_failsTheRun_withStorage_andHalfWritesNothing() async throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try DurableStore(path: folder.file(), durability: .normal)
        try store.register(Big.self)
        let run = try await store.start(Big.self, id: "full", input: 0)
        let seen = Checkpoint()
        Task {
            while Big.held.withLock({ $0 }) == nil { try? await Task.sleep(nanoseconds: 1_000_000) }
            seen.fulfill()
        }
        #expect(await seen.wait())
        // No page may be added from now on (SQLite keeps the limit at the current size): the next write
        // that needs a page fails as a full disk would.
        try await DurableMeasurements.execute("PRAGMA max_page_count = 1", on: store)
        // A value big enough to need new pages.
        Big.held.withLock { $0 }?.succeed(String(repeating: "x", count: 200_000))
        do {
            _ = try await run.value
            Issue.record("the run did not fail")
        } catch let error as DurableError {
            guard case .storage(let message) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(!message.isEmpty)
        }
        try await DurableMeasurements.execute("PRAGMA max_page_count = 1000000", on: store)
        let step = try #require(try await store.runs().first?.steps.last)
        #expect(step.state != .completed)  // nothing half-written: the completion was not recorded
    }

    @Test(arguments: StoreKind.allCases) func aBackoff_isRecorded_andAResumedRunWaitsForIt_notRunningAgainAtOnce(
        kind: StoreKind
    ) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        Probe.failuresLeft.withLock { $0["\(kind)-backoff"] = 1 }
        do {
            let first = try await place.open()
            try first.register(LongBackoff.self)
            _ = try await first.start(LongBackoff.self, id: "b", input: "\(kind)-backoff")
            let failed = Checkpoint()
            Task {
                while (try? await first.runs().first?.steps.first?.nextAttempt) == nil {
                    try? await Task.sleep(nanoseconds: 2_000_000)
                }
                failed.fulfill()
            }
            #expect(await failed.wait())
            first.close()  // killed during the backoff
        }
        let second = try await place.open()
        defer { second.close() }
        try second.register(LongBackoff.self)
        #expect(try await second.resumeUnfinished().resumed == ["b"])
        let step = try #require(try await second.runs().first?.steps.first)
        let next = try #require(step.nextAttempt)
        // The recorded time of the next attempt: an hour after the failure, not an hour after the resume.
        let failedAt = try #require(step.ended)
        #expect(abs(next.timeIntervalSince(failedAt) - 3_600) < 5)
        #expect(step.attempts == 1 && step.state == .pending)
        #expect(Probe.counter.count("\(kind)-backoff/flaky") == 1)  // waiting, not run again
        try await second.cancel(runID: "b")
    }

    struct Big: DurableWorkflow {
        static let name = "big"
        static let held = Locked<CommandResult<String>?>(nil)
        static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<String> {
            flow.step("big") { _ in
                Command<String> { result in
                    held.withLock { $0 = result }
                    return nil
                }
            }
        }
    }

    struct LongBackoff: DurableWorkflow {
        static let name = "flaky"
        static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
            flow.step("flaky", retry: .attempts(3, backoff: .constant(.seconds(3_600)))) { context in
                Probe.flaky(input, context)
            }
        }
    }
}
