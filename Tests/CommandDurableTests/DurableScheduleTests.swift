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
        let first = try #require(try await store.schedules().compactMap(\.next).min())
        // Down: no worker, while five slots pass.
        #expect(await eventually { Date() > first.addingTimeInterval(4.5) })
        let worker = try store.work(concurrency: 4)
        #expect(
            await eventually {
                let schedules = (try? await store.schedules()) ?? []
                return schedules.count == 4
                    && schedules.allSatisfy { ($0.next ?? .distantPast) > first.addingTimeInterval(5) }
            })
        await worker.stop()
        let records = try await store.runs()
        let fired = Dictionary(uniqueKeysWithValues: policies.map { ($0.0, Self.slots(records, of: $0.0)) })
        // Each policy's firings for the slots of the downtime (the first five slots).
        let down = first...first.addingTimeInterval(4)
        let counts = fired.mapValues { $0.filter { down.contains($0) }.count }
        #expect(counts["all"] == 5, "\(counts)")
        #expect(counts["two"] == 2, "\(counts)")
        #expect(counts["latest"] == 1, "\(counts)")
        #expect((counts["skip"] ?? 9) <= 1, "\(counts)")
        // The latest's and the two's are the latest slots of the downtime.
        #expect(fired["two"]?.filter { down.contains($0) }.first.map { $0 >= first.addingTimeInterval(3) } == true)
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
