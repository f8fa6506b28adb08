import CommandDurable
import CommandTestSupport
import Dispatch
import Foundation
import Testing

/// `before`, a sleep of `input.seconds`, then `after` (its value 7).
struct Nap: DurableWorkflow {
    static let name = "nap"
    struct Input: Codable, Sendable {
        var tag: String
        var seconds: Double
    }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Int> {
        let before = flow.step("before") { _ in Probe.value("\(input.tag)/before", 1) }
        let nap = flow.sleep("nap", for: .milliseconds(Int(input.seconds * 1_000)), waitingFor: [before])
        return flow.step("after", waitingFor: [nap]) { _ in Probe.value("\(input.tag)/after", 7) }
    }
}

/// A sleep until a date computed in `build` (`Date()` + 10 s): taken from the record at every later build.
struct NapUntil: DurableWorkflow {
    static let name = "nap-until"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
        let nap = flow.sleep("nap", until: Date().addingTimeInterval(10))
        return flow.step("after", waitingFor: [nap]) { _ in Probe.value("\(input)/after", 8) }
    }
}

/// Waits for an `approval` (a `String`) for up to `timeout` seconds, then `"got <value>"` or `"none"`;
/// with `holdAfter`, a step after it that never ends (the run stays running).
struct Approval: DurableWorkflow {
    static let name = "approval"
    struct Input: Codable, Sendable {
        var tag: String
        var timeout: Double?
        var holdAfter = false
    }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<String> {
        let approval = flow.event(
            "approval", of: String.self, timeout: input.timeout.map { .milliseconds(Int($0 * 1_000)) })
        let answer = flow.step("answer", after: approval) { _, approval -> Command<String> in
            Command<String>.just(approval.map { "got \($0)" } ?? "none")
        }
        guard input.holdAfter else { return answer }
        return flow.step("held", after: answer) { _, answer in
            Command<String> { result in
                Probe.counter.hit("\(input.tag)/held")
                return BlockCancelable { _ = result }
            }
        }
    }
}

/// One step that never ends (until cancelled: its cancels are counted), with a timeout and retries.
struct Stuck: DurableWorkflow {
    static let name = "stuck"
    struct Input: Codable, Sendable {
        var tag: String
        var timeout: Double?
        var attempts = 1
    }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Int> {
        flow.step(
            "stuck", retry: .attempts(input.attempts), timeout: input.timeout.map { .milliseconds(Int($0 * 1_000)) }
        ) { context in
            Command<Int> { result in
                Probe.counter.hit("\(input.tag)/stuck")
                return BlockCancelable {
                    Probe.counter.hit("\(input.tag)/stuck-cancelled")
                    _ = result
                }
            }
        }
    }
}

/// One step that notes its run's order of execution.
struct Ordered: DurableWorkflow {
    static let name = "ordered"
    static let order = Locked<[String]>([])

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
        flow.step("one") { context in
            Command<Int> { result in
                order.withLock { $0.append(context.runID) }
                result.succeed(1)
                return nil
            }
        }
    }
}

/// Time, events and limits: sleeps, events, deadlines, step timeouts, delayed starts, priorities, tags,
/// on both stores, for runs started here and runs worked by workers.
@Suite struct DurableTimeTests {
    enum Mode: String, CaseIterable, Sendable, CustomStringConvertible {
        case started
        case enqueued
        var description: String { rawValue }
    }

    private static func step(_ id: String, of record: DurableRunRecord?) -> DurableStepRecord? {
        record?.steps.first { $0.id == id }
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aSleep_holdsTheStepAfterIt_untilItsRecordedEnd(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Nap.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let worker = mode == .enqueued ? try store.work(concurrency: 2) : nil
        let tag = "\(kind)-\(mode)-nap"
        let input = Nap.Input(tag: tag, seconds: 0.4)
        let run =
            mode == .enqueued
            ? try await store.enqueue(Nap.self, id: "n", input: input)
            : try await store.start(Nap.self, id: "n", input: input)
        #expect(try await run.value == 7)
        let record = try #require(try await store.runs().first)
        let before = try #require(Self.step("before", of: record)?.ended)
        let nap = try #require(Self.step("nap", of: record))
        let after = try #require(Self.step("after", of: record)?.started)
        // The step after the sleep began no earlier than the sleep's end, recorded from its beginning.
        #expect(after.timeIntervalSince(before) >= 0.4, "after began \(after.timeIntervalSince(before)) s after before")
        #expect(nap.state == .completed && nap.attempts == 1, "\(nap)")
        #expect(Probe.counter.count("\(tag)/after") == 1)
        await worker?.stop()
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aSleepingRun_isCancelled_andTheStepAfterNeverRuns(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Nap.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(mode)-cancel-nap"
        let worker = mode == .enqueued ? try store.work(concurrency: 2) : nil
        let input = Nap.Input(tag: tag, seconds: 600)
        let run =
            mode == .enqueued
            ? try await store.enqueue(Nap.self, id: "n", input: input)
            : try await store.start(Nap.self, id: "n", input: input)
        #expect(await eventually { Self.step("nap", of: try? await store.runs().first)?.nextAttempt != nil })
        try await store.cancel(runID: "n")
        await #expect(throws: CancellationError.self) { _ = try await run.value }
        await worker?.stop()
        let record = try #require(try await store.runs().first)
        #expect(record.state == .cancelled)
        #expect(Self.step("nap", of: record)?.state == .cancelled)
        #expect(Probe.counter.count("\(tag)/after") == 0)
    }

    /// A crash tested by crashing: the kill tests' worker starts a 10 s sleep after a step ("n") and a sleep
    /// until `Date()` + 10 s computed in `build` ("u"), and kills itself with `SIGKILL` once both began.
    @Test(arguments: StoreKind.allCases)
    func aSleepCutByAKill_waitsOnlyTheRest_afterTheResume(kind: StoreKind) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("nap-\(UUID().uuidString)").path
        let child = try DurableKillTests.Child(
            store: place.location, log: log, seed: 1, environment: ["DURABLE_WORKER_MODE": "nap"])
        #expect(await child.exitCode() == -SIGKILL, "\(child.printed)")
        let store = try await place.open()
        defer { store.close() }
        try store.register(Nap.self)
        try store.register(NapUntil.self)
        let recorded = try await store.runs()
        let napEnd = try #require(Self.step("nap", of: recorded.first { $0.id == "n" })?.nextAttempt)
        let untilEnd = try #require(Self.step("nap", of: recorded.first { $0.id == "u" })?.nextAttempt)
        // Down for most of the sleeps (their last 2 s left), then resumed.
        #expect(await eventually { Date() > min(napEnd, untilEnd).addingTimeInterval(-2) })
        let report = try await store.resumeUnfinished()
        #expect(Set(report.resumed) == ["n", "u"])
        let nap = try #require(try await store.run(Nap.self, id: "n"))
        let until = try #require(try await store.run(NapUntil.self, id: "u"))
        #expect(try await nap.value == 7)
        #expect(try await until.value == 8)
        let runs = try await store.runs()
        for (id, end) in [("n", napEnd), ("u", untilEnd)] {
            let record = runs.first { $0.id == id }
            let after = try #require(Self.step("after", of: record)?.started)
            // The rest waited (not less), and the sleep not started over: its recorded end is the one the
            // killed process recorded (a sleep begun again, or the build's new `Date()` + 10 s, would have
            // recorded one at least 8 s later).
            #expect(after >= end.addingTimeInterval(-0.01), "\(id): \(after) before \(end)")
            let due = try await DurableMeasurements.query(
                "SELECT due FROM steps WHERE run_id = '\(id)' AND step_id = 'nap'", on: store
            ).first?.first?.double
            #expect(
                due.map { abs($0 - end.timeIntervalSince1970) < 0.001 } == true,
                "\(id): due \(due ?? 0), recorded \(end)")
            #expect(Self.step("nap", of: record)?.state == .completed)
            #expect(Self.step("before", of: record).map { $0.state == .completed && $0.attempts == 1 } ?? true)
        }
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func anEvent_sentBeforeOrDuringItsWait_isReadOnce(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Approval.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(mode)-event"
        // Before: sent to a run recorded and not begun (no worker yet).
        let early = try await store.enqueue(Approval.self, id: "early", input: .init(tag: tag))
        try await store.send("early value", event: "approval", toRun: "early")
        // During: sent once the wait began (its step pending, its end recorded: none, without a timeout).
        let late =
            mode == .enqueued
            ? try await store.enqueue(Approval.self, id: "late", input: .init(tag: tag))
            : try await store.start(Approval.self, id: "late", input: .init(tag: tag))
        let worker = try store.work(concurrency: 2)
        #expect(try await early.value == "got early value")
        #expect(
            await eventually {
                let record = try? await store.runs(.init(limit: 10)).first { $0.id == "late" }
                return Self.step("approval", of: record)?.nextAttempt != nil
            })
        try await store.send("late value", event: "approval", toRun: "late")
        #expect(try await late.value == "got late value")
        let records = try await store.runs()
        for record in records {
            #expect(Self.step("approval", of: record)?.attempts == 1, "\(record.id): read once")
        }
        // Each refusal, nothing recorded.
        await #expect(throws: DurableError.runEnded("late")) {
            try await store.send("again", event: "approval", toRun: "late")
        }
        await #expect(throws: DurableError.unknownRun("nobody")) {
            try await store.send("x", event: "approval", toRun: "nobody")
        }
        await worker.stop()
    }

    @Test(arguments: StoreKind.allCases)
    func anEvent_sentFromAnotherStore_wakesARunStartedHere(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Approval.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-other"
        let run = try await store.start(Approval.self, id: "r", input: .init(tag: tag, holdAfter: true))
        #expect(
            await eventually {
                Self.step("approval", of: try? await store.runs().first)?.nextAttempt != nil
            })
        // Another process's store (this workflow not registered there: nothing checked but the record).
        let other = try await fresh.place.open()
        defer { other.close() }
        try await other.send("from afar", event: "approval", toRun: "r")
        await #expect(throws: DurableError.eventAlreadySent(run: "r", event: "approval")) {
            try await other.send("twice", event: "approval", toRun: "r")
        }
        #expect(await eventually { Probe.counter.count("\(tag)/held") == 1 })
        let answer = try #require(try await store.runs().first?.steps.first { $0.id == "answer" })
        #expect(answer.value == Data("\"got from afar\"".utf8))
        run.cancel()
    }

    /// A crash tested by crashing: the kill tests' worker starts a run waiting for its event and kills
    /// itself once the wait began; the value is sent while no process runs it, then the run is resumed.
    @Test(arguments: StoreKind.allCases)
    func anEvent_sentWhileItsWaitingProcessIsDead_isReadAfterTheResume(kind: StoreKind) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("event-\(UUID().uuidString)").path
        let child = try DurableKillTests.Child(
            store: place.location, log: log, seed: 1, environment: ["DURABLE_WORKER_MODE": "event"])
        #expect(await child.exitCode() == -SIGKILL, "\(child.printed)")
        let store = try await place.open()
        defer { store.close() }
        try store.register(Approval.self)
        try await store.send("after the kill", event: "approval", toRun: "e")
        let report = try await store.resumeUnfinished()
        #expect(report.resumed == ["e"])
        let run = try #require(try await store.run(Approval.self, id: "e"))
        #expect(try await run.value == "got after the kill")
        #expect(Self.step("approval", of: try await store.runs().first)?.attempts == 1)
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func anEvent_whoseTimeoutPasses_isNil_andClosed(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Approval.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(mode)-timeout"
        let worker = mode == .enqueued ? try store.work(concurrency: 2) : nil
        let input = Approval.Input(tag: tag, timeout: 0.3, holdAfter: true)
        _ =
            mode == .enqueued
            ? try await store.enqueue(Approval.self, id: "t", input: input)
            : try await store.start(Approval.self, id: "t", input: input)
        #expect(await eventually { Probe.counter.count("\(tag)/held") == 1 })
        let record = try #require(try await store.runs().first)
        #expect(record.steps.first { $0.id == "answer" }?.value == Data("\"none\"".utf8))
        #expect(Self.step("approval", of: record)?.value == Data("null".utf8))
        await #expect(throws: DurableError.eventClosed(run: "t", event: "approval")) {
            try await store.send("too late", event: "approval", toRun: "t")
        }
        // This process registered the workflow: a value the event cannot read, a step that is not an event.
        await #expect(throws: DurableError.self) { try await store.send(5, event: "approval", toRun: "t") }
        await #expect(throws: DurableError.unknownEvent(run: "t", event: "answer")) {
            try await store.send("x", event: "answer", toRun: "t")
        }
        try await store.cancel(runID: "t")
        await worker?.stop()
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aStepTimeout_cancelsTheAttempt_andCountsAsAFailure(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Stuck.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(mode)-stuck"
        let worker = mode == .enqueued ? try store.work(concurrency: 2) : nil
        let input = Stuck.Input(tag: tag, timeout: 0.3, attempts: 2)
        let run =
            mode == .enqueued
            ? try await store.enqueue(Stuck.self, id: "s", input: input)
            : try await store.start(Stuck.self, id: "s", input: input)
        do {
            _ = try await run.value
            Issue.record("a step that never ends completed")
        } catch {
            #expect("\(error)".contains("timeout"), "\(error)")
        }
        // Each attempt whose command began was cancelled (a loaded machine may time one out before its
        // command's body ran: counted by the record, not by the body).
        #expect(Probe.counter.count("\(tag)/stuck") == Probe.counter.count("\(tag)/stuck-cancelled"))
        let record = try #require(try await store.runs().first)
        #expect(record.state == .failed)
        #expect(Self.step("stuck", of: record)?.attempts == 2)
        #expect(Self.step("stuck", of: record)?.lastError?.contains("timeout") == true)
        await worker?.stop()
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aDeadline_failsTheRun_andStopsItsSteps(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Stuck.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-\(mode)-deadline"
        let worker = mode == .enqueued ? try store.work(concurrency: 2) : nil
        let options = DurableRunOptions(deadline: .milliseconds(400))
        let run =
            mode == .enqueued
            ? try await store.enqueue(Stuck.self, id: "d", input: .init(tag: tag), options: options)
            : try await store.start(Stuck.self, id: "d", input: .init(tag: tag), options: options)
        await #expect(throws: DurableError.deadlineExceeded(run: "d")) { _ = try await run.value }
        // Its step stopped: cancelled where its command began (a loaded machine may pass the deadline first).
        #expect(
            await eventually {
                Probe.counter.count("\(tag)/stuck-cancelled") == Probe.counter.count("\(tag)/stuck")
            })
        let record = try #require(try await store.runs().first)
        #expect(record.state == .failed)
        #expect(record.deadline != nil)
        #expect(Self.step("stuck", of: record)?.state == .cancelled)
        await worker?.stop()
    }

    @Test(arguments: StoreKind.allCases)
    func aDeadline_passingWhileNoProcessRuns_endsTheRunAtTheNextOpen(kind: StoreKind) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let first = try await place.open()
        try first.register(Stuck.self)
        _ = try await first.enqueue(
            Stuck.self, id: "d", input: .init(tag: "\(kind)-down"), options: .init(deadline: .milliseconds(200)))
        let deadline = try #require(try await first.runs().first?.deadline)
        first.close()
        // Down until the deadline passed.
        #expect(await eventually { Date() > deadline.addingTimeInterval(0.05) })
        let second = try await place.open()
        defer { second.close() }
        try second.register(Stuck.self)
        #expect(await eventually { (try? await second.runs().first?.state) == .failed })
        let run = try #require(try await second.run(Stuck.self, id: "d"))
        await #expect(throws: DurableError.deadlineExceeded(run: "d")) { _ = try await run.value }
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aDelayedStart_runsNothingBeforeItsDate(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Sum.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let worker = mode == .enqueued ? try store.work(concurrency: 2) : nil
        let notBefore = Date().addingTimeInterval(0.5)
        let input = Sum.Input(tag: "\(kind)-\(mode)-delayed")
        let options = DurableRunOptions(notBefore: notBefore)
        let run =
            mode == .enqueued
            ? try await store.enqueue(Sum.self, id: "later", input: input, options: options)
            : try await store.start(Sum.self, id: "later", input: input, options: options)
        #expect(try await run.value == 5)
        let record = try #require(try await store.runs().first)
        #expect(abs((record.notBefore ?? .distantPast).timeIntervalSince(notBefore)) < 0.001)
        for step in record.steps {
            let started = try #require(step.started)
            #expect(started >= notBefore.addingTimeInterval(-0.01), "\(step.id) began at \(started)")
        }
        await worker?.stop()
    }

    @Test(arguments: StoreKind.allCases)
    func priorities_areClaimedHigherFirst(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Ordered.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let prefix = "\(kind)-priority"
        let low = (0..<4).map { (id: "\(prefix)-low-\($0)", input: "") }
        let high = (0..<4).map { (id: "\(prefix)-high-\($0)", input: "") }
        _ = try await store.enqueue(Ordered.self, runs: low)
        let last = try await store.enqueue(Ordered.self, runs: high, options: .init(priority: 10))
        let worker = try store.work(concurrency: 1)
        _ = try await last.last?.value
        #expect(await eventually { Ordered.order.withLock { $0.filter { $0.hasPrefix(prefix) }.count } == 8 })
        let order = Ordered.order.withLock { $0.filter { $0.hasPrefix(prefix) } }
        #expect(order == high.map(\.id) + low.map(\.id), "\(order)")
        #expect(try await store.runs().filter { $0.priority == 10 }.count == 4)
        await worker.stop()
    }

    @Test(arguments: StoreKind.allCases)
    func tags_findRuns_andCancelThem(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Stuck.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-tags"
        _ = try await store.enqueue(
            Stuck.self, runs: [("a", .init(tag: tag)), ("b", .init(tag: tag))],
            options: .init(tags: ["user:42", "mail"]))
        _ = try await store.enqueue(Stuck.self, id: "c", input: .init(tag: tag), options: .init(tags: ["user:7"]))
        #expect(try await store.runs(.tagged("user:42")).map(\.id) == ["a", "b"])
        #expect(try await store.runs(.init(tags: ["user:42", "mail"])).map(\.id) == ["a", "b"])
        #expect(try await store.runs(.tagged("user:4")).isEmpty, "a tag is matched whole")
        #expect(try await store.runs().first { $0.id == "c" }?.tags == ["user:7"])
        #expect(try await store.cancel(matching: .tagged("user:42")) == 2)
        #expect(try await store.cancel(matching: .tagged("user:42")) == 0)
        let states = try await store.runs().map { "\($0.id)=\($0.state)" }
        #expect(states == ["a=cancelled", "b=cancelled", "c=running"])
        await #expect(throws: DurableError.self) {
            try await store.enqueue(Stuck.self, id: "x", input: .init(tag: tag), options: .init(tags: ["a,b"]))
        }
    }
}
