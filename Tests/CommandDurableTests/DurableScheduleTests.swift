import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// A schedule's run: one step whose value is its run's id.
struct Beat: DurableWorkflow {
    static let name = "beat"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<String> {
        flow.step("beat") { context in Command<String>.just(context.runID) }
    }
}

/// Schedules: each slot one run whichever processes fire it, none missed; catch-up after downtime; the
/// records and the refusals.
@Suite struct DurableScheduleTests {
    /// The slots of the runs of schedule `id`, from their ids (`"<id>@<ISO 8601>"`), in order.
    static func slots(_ records: [DurableRunRecord], of id: String) -> [Date] {
        let formatter = ISO8601DateFormatter()
        return records.compactMap { record -> Date? in
            guard record.id.hasPrefix("\(id)@") else { return nil }
            return formatter.date(from: String(record.id.dropFirst(id.count + 1)))
        }.sorted()
    }

    @Test(arguments: StoreKind.allCases)
    func aScheduleEverySecond_firedByThreeWorkerProcesses_startsOneRunPerSlot_noneMissed(kind: StoreKind) async throws {
        guard let place = try await StorePlace.make(kind) else { return }
        defer { place.remove() }
        let store = try await place.open()
        defer { store.close() }
        try store.register(Beat.self)
        try await store.schedule(Beat.self, id: "beat", every: .seconds(1), input: "", catchUp: .all(max: 100))
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("beat-\(UUID().uuidString)").path
        let children = try (1...3).map { seed in
            try DurableKillTests.Child(
                store: place.location, log: log, seed: UInt64(seed), environment: ["DURABLE_WORKER_MODE": "work"])
        }
        #expect(
            await eventually {
                let records = (try? await store.runs(.workflow("beat"))) ?? []
                return records.filter { $0.state == .completed }.count >= 20
            })
        _ = FileManager.default.createFile(atPath: log + ".stop", contents: nil)
        for child in children { #expect(await child.exitCode() == 0, "\(child.printed)") }
        let records = try await store.runs(.workflow("beat"))
        let slots = Self.slots(records, of: "beat")
        #expect(slots.count == records.count, "every run is a slot's")
        #expect(slots.count >= 20)
        // One run per slot (the run id is the slot's), and no slot missed between the first and the last.
        let gaps = zip(slots, slots.dropFirst()).map { $1.timeIntervalSince($0) }
        #expect(gaps.allSatisfy { $0 == 1 }, "gaps between slots: \(gaps)")
        #expect(records.allSatisfy { $0.state == .completed })
        let schedule = try #require(try await store.schedules().first)
        #expect(schedule.last == slots.last)
        #expect(schedule.interval == .seconds(1))
    }

    @Test(arguments: StoreKind.allCases)
    func catchUp_afterFiveSecondsWithoutAWorker_firesAsEachPolicySays(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Beat.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let policies: [(String, DurableCatchUp)] = [
            ("skip", .skip), ("latest", .latest), ("all", .all(max: 100)), ("two", .all(max: 2)),
        ]
        for (id, catchUp) in policies {
            try await store.schedule(Beat.self, id: id, every: .seconds(1), input: "", catchUp: catchUp)
        }
        let firsts = Dictionary(
            uniqueKeysWithValues: try await store.schedules().map { ($0.id, try #require($0.next)) })
        // Down: no worker, while five slots of each schedule pass.
        let last = try #require(firsts.values.max())
        #expect(await eventually { Date() > last.addingTimeInterval(4.5) })
        let workerStart = Date()
        let worker = try store.work(concurrency: 4)
        #expect(
            await eventually {
                let schedules = (try? await store.schedules()) ?? []
                return schedules.count == 4 && schedules.allSatisfy { $0.last != nil && $0.next! > workerStart }
            })
        await worker.stop()
        let records = try await store.runs()
        // Each policy's firings of the slots that passed with no worker (5 or more a schedule).
        var missed: [String: [Date]] = [:]
        var fired: [String: [Date]] = [:]
        for (id, _) in policies {
            let first = try #require(firsts[id])
            missed[id] = stride(from: 0.0, to: workerStart.timeIntervalSince(first), by: 1).map {
                first.addingTimeInterval($0)
            }
            fired[id] = Self.slots(records, of: id).filter { $0 < workerStart }
        }
        #expect(missed.values.allSatisfy { $0.count >= 5 }, "\(missed)")
        #expect(fired["all"] == missed["all"], "all: \(fired["all"] ?? []) of \(missed["all"] ?? [])")
        // The latest of them at most (a slot due by the time the worker fired may come after them).
        #expect(fired["two"].map { $0.count <= 2 && $0 == Array(missed["two"]!.suffix($0.count)) } == true)
        #expect(fired["latest"].map { $0.count <= 1 && $0 == Array(missed["latest"]!.suffix($0.count)) } == true)
        #expect((fired["skip"]?.count ?? 9) <= 1, "skip: \(fired["skip"] ?? [])")
        // Every schedule fired, and goes on.
        #expect(try await store.schedules().allSatisfy { $0.last != nil })
    }

    @Test func schedules_areListedReplacedAndRemoved_andBadOnesRefused() async throws {
        let store = try DurableStore.inMemory()
        defer { store.close() }
        try store.register(Beat.self)
        let paris = try #require(TimeZone(identifier: "Europe/Paris"))
        try await store.schedule(
            Beat.self, id: "nightly", cron: "0 3 * * *", timeZone: paris, input: "n", catchUp: .latest)
        try await store.schedule(Beat.self, id: "beat", every: .seconds(60), input: "b", catchUp: .skip)
        let schedules = try await store.schedules()
        #expect(schedules.map(\.id) == ["beat", "nightly"])
        let nightly = try #require(schedules.last)
        #expect(nightly.cron == "0 3 * * *" && nightly.timeZone == paris && nightly.last == nil)
        #expect(nightly.next == (try DurableCron("0 3 * * *", timeZone: paris)).next(after: Date()))
        // Replaced: its expression and next slot.
        try await store.schedule(Beat.self, id: "nightly", cron: "@hourly", timeZone: paris, input: "n")
        #expect(try await store.schedules().last?.cron == "@hourly")
        #expect(try await store.unschedule(id: "nightly"))
        #expect(try await store.unschedule(id: "nightly") == false)
        #expect(try await store.schedules().map(\.id) == ["beat"])
        await #expect(throws: DurableError.self) {
            try await store.schedule(Beat.self, id: "bad", cron: "61 * * * *", input: "")
        }
        await #expect(throws: DurableError.self) {
            try await store.schedule(Beat.self, id: "fast", every: .milliseconds(100), input: "")
        }
        await #expect(throws: DurableError.self) {
            try await store.schedule(Beat.self, id: "none", every: .seconds(1), input: "", catchUp: .all(max: 0))
        }
    }
}
