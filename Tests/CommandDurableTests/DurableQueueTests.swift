import CommandDurable
import CommandTestSupport
import Dispatch
import Foundation
import Testing

extension DurableQueue {
    /// Two at once, one per key.
    static let limited = DurableQueue("limited", concurrency: 2, perKey: 1)
    /// Five starts a second.
    static let rated = DurableQueue("rated", concurrency: 10, rate: DurableRate(5, per: .seconds(1)))
}

/// One step on a queue, working `ms` milliseconds; its interval noted (in this process: `intervals`; in
/// the kill tests' worker processes, the same workflow logs it).
struct Queued: DurableWorkflow {
    static let name = "queued"
    struct Input: Codable, Sendable {
        var key: String
        var ms: Int
        var rated = false
    }
    static let intervals = Locked<[String: [(key: String, start: Double, end: Double)]]>([:])

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Int> {
        flow.step("work", queue: input.rated ? .rated : .limited, key: input.key) { context in
            Command<Int> { result in
                let start = Date().timeIntervalSince1970
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(input.ms)) {
                    let end = Date().timeIntervalSince1970
                    let test = String(context.runID.prefix { $0 != "-" })
                    intervals.withLock { $0[test, default: []].append((input.key, start, end)) }
                    result.succeed(1)
                }
                return nil
            }
        }
    }
}

/// Queues' limits, across processes: never more at once than the queue's concurrency or its per-key
/// limit (from the steps' own intervals), never more starts in any window than its rate (from the
/// recorded starts, by the database's clock).
@Suite struct DurableQueueTests {
    /// The most intervals open at once, overall and for one key.
    static func overlap(_ intervals: [(key: String, start: Double, end: Double)]) -> (all: Int, perKey: Int) {
        func most(_ spans: [(start: Double, end: Double)]) -> Int {
            // Ends before starts at one instant: a place freed and taken at once is not an overlap.
            var events: [(time: Double, change: Int)] = []
            for span in spans {
                events.append((span.start, 1))
                events.append((span.end, -1))
            }
            events.sort { left, right in
                left.time != right.time ? left.time < right.time : left.change < right.change
            }
            var open = 0
            var top = 0
            for (_, change) in events {
                open += change
                top = max(top, open)
            }
            return top
        }
        let byKey = Dictionary(grouping: intervals, by: \.key).values.map { most($0.map { ($0.start, $0.end) }) }
        return (most(intervals.map { ($0.start, $0.end) }), byKey.max() ?? 0)
    }

    /// The most recorded starts in any window of `seconds`.
    static func mostStarts(_ starts: [Date], within seconds: Double) -> Int {
        let sorted = starts.map(\.timeIntervalSince1970).sorted()
        var most = 0
        var low = 0
        for high in sorted.indices {
            while sorted[high] - sorted[low] >= seconds { low += 1 }
            most = max(most, high - low + 1)
        }
        return most
    }

    enum Mode: String, CaseIterable, Sendable, CustomStringConvertible {
        case started
        case enqueued
        var description: String { rawValue }
    }

    @Test(arguments: StoreKind.allCases, Mode.allCases)
    func aQueuesConcurrencyAndPerKeyLimits_hold(kind: StoreKind, mode: Mode) async throws {
        guard let fresh = try await freshStore(kind, Queued.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let test = "\(kind)\(mode)limits"
        let worker = mode == .enqueued ? try store.work(concurrency: 8) : nil
        let runs = (0..<12).map { (id: "\(test)-\($0)", input: Queued.Input(key: "k\($0 % 4)", ms: 60)) }
        let started =
            mode == .enqueued
            ? try await store.enqueue(Queued.self, runs: runs) : try await store.start(Queued.self, runs: runs)
        for run in started { #expect(try await run.value == 1) }
        await worker?.stop()
        let intervals = Queued.intervals.withLock { $0[test] ?? [] }
        #expect(intervals.count == 12)
        let overlap = Self.overlap(intervals)
        #expect(overlap.all <= 2 && overlap.perKey <= 1, "\(overlap)")
        #expect(overlap.all == 2, "the queue's two places were used")
    }

    @Test(arguments: StoreKind.allCases)
    func threeWorkerProcesses_holdTheLimits_andTheRate(kind: StoreKind) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        defer { store.close() }
        try store.register(Queued.self)
        let limited = (0..<12).map { (id: "limited-\($0)", input: Queued.Input(key: "k\($0 % 4)", ms: 100)) }
        let rated = (0..<15).map { (id: "rated-\($0)", input: Queued.Input(key: "r", ms: 1, rated: true)) }
        _ = try await store.enqueue(Queued.self, runs: limited + rated)
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("queued-\(UUID().uuidString)").path
        let children = try (1...3).map { seed in
            try DurableKillTests.Child(
                store: place.location, log: log, seed: UInt64(seed), environment: ["DURABLE_WORKER_MODE": "work"])
        }
        #expect(
            await eventually {
                let records = (try? await store.runs()) ?? []
                return records.count == 27 && records.allSatisfy { $0.state == .completed }
            })
        _ = FileManager.default.createFile(atPath: log + ".stop", contents: nil)
        for child in children { #expect(await child.exitCode() == 0, "\(child.printed)") }
        // The limited queue's intervals, as the processes logged them.
        let lines = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n") ?? []
        var open: [String: (key: String, start: Double)] = [:]
        var intervals: [(key: String, start: Double, end: Double)] = []
        for line in lines {
            let parts = line.split(separator: " ").map(String.init)
            guard parts.count == 4, parts[1].hasPrefix("limited-"), let time = Double(parts[3]) else { continue }
            if parts[0] == "qstart" { open[parts[1]] = (parts[2], time) }
            if parts[0] == "qend", let begun = open.removeValue(forKey: parts[1]) {
                intervals.append((begun.key, begun.start, time))
            }
        }
        #expect(intervals.count == 12)
        let overlap = Self.overlap(intervals)
        #expect(overlap.all <= 2 && overlap.perKey <= 1, "\(overlap)")
        // The rated queue's starts, as recorded by the database's clock.
        let starts = try await store.runs().filter { $0.id.hasPrefix("rated-") }.compactMap { $0.steps.first?.started }
        #expect(starts.count == 15)
        #expect(Self.mostStarts(starts, within: 1) <= 5, "\(starts.map(\.timeIntervalSince1970).sorted())")
        // Which processes took them.
        let owners = Set(try await store.runs().compactMap { $0.steps.first?.owner })
        #expect(owners.count >= 2, "the steps ran in \(owners.count) process(es)")
    }
}
