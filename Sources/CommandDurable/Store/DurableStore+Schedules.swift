import CommandCore
import Foundation

// Schedules: runs started at a cron expression's slots, or every interval, by whichever worker looks.
extension DurableStore {
    /// Starts a run of `workflow` with `input` at each slot of `cron` in `timeZone` (see ``DurableCron``),
    /// from now on, by every ``DurableWorker`` of any process sharing the store: each slot starts exactly
    /// one run, whichever and however many processes run workers, with the id `"<id>@<slot, ISO 8601
    /// UTC>"` (`nightly@2026-11-28T02:00:00Z`). Slots that passed while no worker ran fire as `catchUp`
    /// says. A schedule with this `id` is replaced (its next slot computed again from now).
    ///
    /// Throws ``DurableError/invalidSchedule(_:)`` for an expression that cannot be used (naming the
    /// field), ``DurableError/unknownWorkflow(_:)`` for a workflow not registered here,
    /// ``DurableError/invalidFlow(workflow:message:)`` when `build` fails for `input`.
    public func schedule<W: DurableWorkflow>(
        _ workflow: W.Type, id: String, cron: String, timeZone: TimeZone = .current, input: W.Input,
        catchUp: DurableCatchUp = .latest
    ) async throws {
        try await saveSchedule(
            W.self, id: id, rule: .cron(try DurableCron(cron, timeZone: timeZone)), input: input, catchUp: catchUp)
    }

    /// Starts a run of `workflow` every `interval` (at least a second), at the multiples of `interval` since
    /// 1970 (UTC): the same slots in every process. Otherwise as ``schedule(_:id:cron:timeZone:input:catchUp:)``.
    public func schedule<W: DurableWorkflow>(
        _ workflow: W.Type, id: String, every interval: Duration, input: W.Input, catchUp: DurableCatchUp = .latest
    ) async throws {
        guard interval >= .seconds(1) else {
            throw DurableError.invalidSchedule(
                "schedule '\(id)' every \(interval): give an interval of a second or more")
        }
        try await saveSchedule(W.self, id: id, rule: .every(interval.inSeconds), input: input, catchUp: catchUp)
    }

    /// Removes the schedule `id` (runs it started are kept); returns whether there was one.
    @discardableResult
    public func unschedule(id: String) async throws -> Bool {
        try await storage.removeSchedule(id: id)
    }

    /// The schedules recorded, by id, each with its next slot and the last it fired.
    public func schedules() async throws -> [DurableSchedule] {
        try await storage.loadSchedules().map(\.record)
    }

    private func saveSchedule<W: DurableWorkflow>(
        _: W.Type, id: String, rule: ScheduleRule, input: W.Input, catchUp: DurableCatchUp
    ) async throws {
        guard registered(W.name) != nil else { throw DurableError.unknownWorkflow(W.name) }
        if let reason = DurableFlow.invalidReason(id) {
            throw DurableError.invalidSchedule("the schedule id \(String(reflecting: id)) \(reason)")
        }
        if case .all(let max) = catchUp, max < 1 {
            throw DurableError.invalidSchedule("schedule '\(id)' has .all(max: \(max)): give 1 or more")
        }
        // Its runs must be buildable: checked now, not at its first slot.
        _ = try Self.plan(W.self, input: input)
        try await storage.saveSchedule(
            StoredSchedule(
                id: id, workflow: W.name, input: try JSONEncoder().encode(input), rule: rule, catchUp: catchUp,
                next: rule.next(after: Date()), last: nil))
    }

    /// Fires the due slots of the schedules of the workflows registered here (a worker's look); calls
    /// `completion` with when the next slot is due (to look then).
    func fireSchedules(completion: @escaping @Sendable (Date?) -> Void) {
        storage.dueSchedules(workflows: registeredNames) { [self] answer in
            guard case .success(let found) = answer else { return completion(nil) }
            guard !found.due.isEmpty else { return completion(found.next) }
            let group = DispatchGroup()
            let earliest = Locked(found.next)
            for schedule in found.due {
                guard let expected = schedule.next, let workflow = registered(schedule.workflow) else { continue }
                let (fire, next) = schedule.rule.firing(next: expected, now: Date(), catchUp: schedule.catchUp)
                let runs = fire.compactMap { slot -> NewRun? in
                    let id = ScheduleRule.runID(schedule: schedule.id, slot: slot)
                    let stored = StoredRun(
                        id: id, workflow: schedule.workflow, input: schedule.input, state: .pending,
                        cancelRequested: false, failure: nil, finalStep: "", steps: [])
                    guard let plan = try? workflow.plan(stored) else { return nil }
                    return NewRun(id: id, workflow: schedule.workflow, input: schedule.input, plan: plan)
                }
                if let next { earliest.withLock { $0 = min($0 ?? next, next) } }
                group.enter()
                storage.fire(schedule: schedule.id, expected: expected, runs: runs, next: next, last: fire.last) {
                    answer in
                    if case .success(true) = answer, !runs.isEmpty {
                        for run in runs {
                            self.storage.observers.emit(
                                .runCreated, workflow: run.workflow, run: run.id, owner: self.storage.owner)
                        }
                        CommandLogging.log(
                            .info, command: "\(schedule.workflow)/\(schedule.id)",
                            "fired \(runs.map(\.id).joined(separator: ", "))")
                    }
                    group.leave()
                }
            }
            group.notify(queue: .global()) { completion(earliest.withLock { $0 }) }
        }
    }
}
