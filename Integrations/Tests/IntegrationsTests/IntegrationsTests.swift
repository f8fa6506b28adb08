import CommandDurable
import DurableLogging
import DurableMetrics
import DurableServiceLifecycle
import DurableTracing
import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import ServiceLifecycle
import Testing
import Tracing

/// Each adapter against the real package: swift-log, swift-metrics (its test kit), swift-distributed-tracing
/// (its in-memory tracer), swift-service-lifecycle (a real ServiceGroup).

/// A swift-log handler that keeps what it gets.
struct KeptHandler: LogHandler {
    struct Record: Sendable {
        let level: Logger.Level
        let message: String
        let metadata: Logger.Metadata
    }

    final class Box: @unchecked Sendable {
        // `@unchecked Sendable`: `records` is guarded by `lock`.
        let lock = NSLock()
        var records: [Record] = []
        var all: [Record] { lock.withLock { records } }
    }

    let box: Box
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        box.lock.withLock {
            box.records.append(Record(level: event.level, message: "\(event.message)", metadata: event.metadata ?? [:]))
        }
    }
}

/// A fresh SQLite store's path, in a folder of its own.
func freshPath() -> String {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("integrations-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder.appendingPathComponent("store.sqlite").path
}

/// Waits (polling every 5 ms, up to 60 s) until `check` holds.
func eventually(_ check: @escaping @Sendable () async -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(60)
    while Date() < deadline {
        if await check() { return true }
        try? await Task.sleep(nanoseconds: 5_000_000)
    }
    return false
}

/// Per input, the attempts that fail before one succeeds; and the steps held until released.
enum Script {
    // Guards `failures` and `held` (hence `nonisolated(unsafe)`).
    static let lock = NSLock()
    nonisolated(unsafe) static var held: [String: CommandResult<Int>] = [:]

    static func hold(_ key: String, _ result: CommandResult<Int>) { lock.withLock { held[key] = result } }
    static func release(_ key: String, _ value: Int) -> Bool {
        guard let result = lock.withLock({ held.removeValue(forKey: key) }) else { return false }
        result.succeed(value)
        return true
    }
    static func isHeld(_ key: String) -> Bool { lock.withLock { held[key] != nil } }
    /// Forgets a held step (its store closed: it never completes there).
    static func drop(_ key: String) { _ = lock.withLock { held.removeValue(forKey: key) } }
}

/// `a` (fails on its first attempt when the input says so, retried), then `b` (held when the input says so).
struct Pair: DurableWorkflow {
    static let name = "pair"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
        let a = flow.step("a", retry: .attempts(2)) { context in
            Command<Int> { result in
                if input.contains("flaky") && context.attempt == 1 {
                    result.fail(CommandFailure(message: "flaky first attempt"))
                } else {
                    result.succeed(1)
                }
                return nil
            }
        }
        return flow.step("b", after: a) { _, a in
            Command<Int> { result in
                if input.contains("held") { Script.hold(input, result) } else { result.succeed(a + 1) }
                return nil
            }
        }
    }
}

struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(message: String) { description = message }
}

@Suite(.serialized) struct IntegrationsTests {
    @Test func swiftLog_getsTheDurableEntries_resumedTakenOverRetrying() async throws {
        let box = KeptHandler.Box()
        CommandLogging.logger = SwiftLogCommandLogger(Logger(label: "commands") { _ in KeptHandler(box: box) })
        CommandLogging.minimumLevel = .info
        defer { CommandLogging.logger = nil }
        let path = freshPath()
        // Retrying: the first attempt of `a` fails.
        let first = try DurableStore(path: path, lease: .milliseconds(200))
        try first.register(Pair.self)
        #expect(try await first.start(Pair.self, id: "flaky", input: "flaky").value == 2)
        // A run whose step is held when its store closes: resumed by the next store, its step taken over
        // once the lease ran out.
        _ = try await first.start(Pair.self, id: "held", input: "held")
        #expect(await eventually { Script.isHeld("held") })
        first.close()
        Script.drop("held")
        let second = try DurableStore(path: path, lease: .milliseconds(200))
        defer { second.close() }
        try second.register(Pair.self)
        let report = try await second.resumeUnfinished()
        #expect(report.resumed == ["held"])
        #expect(await eventually { Script.isHeld("held") })
        #expect(Script.release("held", 7))
        #expect(await eventually { (try? await second.runs(.run("held")).first?.state) == .completed })
        // An enqueued run whose worker's store closed mid-step: another store's worker takes it over.
        let third = try DurableStore(path: path, lease: .milliseconds(200))
        try third.register(Pair.self)
        let dying = try third.work(concurrency: 1)
        _ = try await third.enqueue(Pair.self, id: "worked", input: "held-worked")
        #expect(await eventually { Script.isHeld("held-worked") })
        third.close()
        Script.drop("held-worked")
        _ = dying
        let fourth = try DurableStore(path: path, lease: .milliseconds(200))
        defer { fourth.close() }
        try fourth.register(Pair.self)
        let worker = try fourth.work(concurrency: 1)
        #expect(await eventually { Script.isHeld("held-worked") })
        #expect(Script.release("held-worked", 8))
        #expect(await eventually { (try? await fourth.runs(.run("worked")).first?.state) == .completed })
        await worker.stop()
        let records = box.all
        func has(_ command: String, _ fragment: String, _ level: Logger.Level) -> Bool {
            records.contains {
                $0.metadata["command"]?.description == command && $0.message.contains(fragment) && $0.level == level
            }
        }
        #expect(has("pair/flaky/a", "retrying at attempt 2", .notice), "\(records.map(\.message))")
        #expect(has("pair/flaky/a", "attempt 2", .notice))
        #expect(has("pair/held", "resumed", .info), "\(records.map(\.message))")
        #expect(has("pair/worked/b", "taken over", .notice), "\(records.map(\.message))")
        #expect(records.allSatisfy { $0.metadata["command"] != nil })
    }

    @Test func swiftMetrics_countsStepsAndTimesThem() async throws {
        let metrics = TestMetrics()
        let observer = DurableMetricsObserver(factory: metrics)
        let store = try DurableStore(path: freshPath())
        defer { store.close() }
        try store.register(Pair.self)
        store.add(observer: observer)
        #expect(try await store.start(Pair.self, id: "m", input: "flaky-metrics").value == 2)
        #expect(
            await eventually {
                (try? metrics.expectCounter("durable.runs", [("workflow", "pair"), ("outcome", "completed")]).totalValue)
                    == 1
            })
        let completedA = try metrics.expectCounter(
            "durable.steps", [("workflow", "pair"), ("step", "a"), ("outcome", "completed")])
        let retryingA = try metrics.expectCounter(
            "durable.steps", [("workflow", "pair"), ("step", "a"), ("outcome", "retrying")])
        #expect(completedA.totalValue == 1 && retryingA.totalValue == 1)
        let duration = try metrics.expectTimer(
            "durable.step.duration", [("workflow", "pair"), ("step", "b"), ("outcome", "completed")])
        #expect(duration.values.count == 1 && duration.values[0] >= 0)
        let queued = try metrics.expectTimer("durable.step.queued", [("workflow", "pair"), ("step", "a")])
        #expect(queued.values.count == 1)
        #expect(metrics.timers.filter { $0.label == "durable.step.queued" }.count == 1)  // `b` comes after `a`
    }

    @Test func swiftTracing_aWorkerElsewhereContinuesTheCallersTrace() async throws {
        let tracer = InMemoryTracer()
        let path = freshPath()
        // The caller: inside its span, the trace's context recorded with the run.
        let caller = try DurableStore(path: path)
        defer { caller.close() }
        try caller.register(Pair.self)
        let span = tracer.startSpan("POST /pairs")
        var context = ServiceContext.topLevel
        context = span.context
        let carried = DurableTracing.currentContext(context, tracer: tracer)
        #expect(!carried.isEmpty)
        let run = try await caller.enqueue(
            Pair.self, id: "traced", input: "flaky-traced", options: DurableRunOptions(context: carried))
        span.end()
        // The worker: another store (another process or host in production), with the observer.
        let workerStore = try DurableStore(path: path)
        defer { workerStore.close() }
        try workerStore.register(Pair.self)
        let tracing = DurableTracingObserver(tracer: tracer)
        workerStore.add(observer: tracing)
        let worker = try workerStore.work(concurrency: 2)
        #expect(try await run.value == 2)
        #expect(await eventually { tracer.finishedSpans.count == 4 })  // the request, a twice, b
        await worker.stop()
        let spans = tracer.finishedSpans
        let request = try #require(spans.first { $0.operationName == "POST /pairs" })
        let steps = spans.filter { $0.operationName.hasPrefix("pair/") }
        #expect(steps.map(\.operationName).sorted() == ["pair/a", "pair/a", "pair/b"])
        #expect(steps.allSatisfy { $0.traceID == request.traceID })
        #expect(steps.allSatisfy { $0.spanContext.parentSpanID == request.spanID })
        #expect(steps.filter { $0.status?.code == .error }.count == 1)  // a's first attempt
    }

    @Test func serviceLifecycle_drainsTheWorker_onGracefulShutdown() async throws {
        let store = try DurableStore(path: freshPath())
        defer { store.close() }
        try store.register(Pair.self)
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: DurableWorkerService(store: store, concurrency: 2))],
                logger: Logger(label: "service-group")))
        // Guards `wasReleased` (hence `nonisolated(unsafe)`).
        let released = NSLock()
        nonisolated(unsafe) var wasReleased = false
        let running = Task { () -> Bool in
            try await group.run()
            // What the group saw when it ended: the held step must have been released (drained) first.
            return released.withLock { wasReleased }
        }
        let run = try await store.enqueue(Pair.self, id: "drained", input: "held-drained")
        #expect(await eventually { Script.isHeld("held-drained") })
        await group.triggerGracefulShutdown()
        released.withLock { wasReleased = true }
        #expect(Script.release("held-drained", 9))
        #expect(try await running.value, "the group ended before the worker's step did")
        #expect(try await run.value == 9)  // b's value: the one it was released with
        #expect(try await store.runs(.run("drained")).first?.state == .completed)
        // Nothing more is claimed once it stopped.
        _ = try await store.enqueue(Pair.self, id: "after", input: "after")
        #expect(try await store.runs(.run("after")).first?.state == .running)
    }
}
