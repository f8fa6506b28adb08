import CommandCore
import Foundation

/// A schedule's row.
struct StoredSchedule: Sendable {
    let id: String
    let workflow: String
    let input: Data
    let rule: ScheduleRule
    let catchUp: DurableCatchUp
    let next: Date?
    let last: Date?

    static let columns = "id, workflow, input, cron, time_zone, every, catch_up, catch_up_max, next, last"

    init(
        id: String, workflow: String, input: Data, rule: ScheduleRule, catchUp: DurableCatchUp, next: Date?, last: Date?
    ) {
        self.id = id
        self.workflow = workflow
        self.input = input
        self.rule = rule
        self.catchUp = catchUp
        self.next = next
        self.last = last
    }

    /// A row of `columns`; nil for one this version cannot read (a time zone or expression it does not know).
    init?(row: [SQLValue]) {
        guard let id = row[0].string, let workflow = row[1].string else { return nil }
        if let expression = row[3].string {
            guard let zone = TimeZone(identifier: row[4].string ?? "UTC"),
                let cron = try? DurableCron(expression, timeZone: zone)
            else { return nil }
            rule = .cron(cron)
        } else if let every = row[5].double, every > 0 {
            rule = .every(every)
        } else {
            return nil
        }
        self.id = id
        self.workflow = workflow
        input = row[2].data ?? Data()
        catchUp = DurableCatchUp(recorded: row[6].string ?? "latest", max: Int(row[7].int ?? 0))
        next = row[8].double.map(Date.init(timeIntervalSince1970:))
        last = row[9].double.map(Date.init(timeIntervalSince1970:))
    }

    var record: DurableSchedule {
        var cron: DurableCron?
        var interval: Duration?
        switch rule {
        case .cron(let expression): cron = expression
        case .every(let seconds): interval = Duration(clampingSeconds: seconds)
        }
        return DurableSchedule(
            id: id, workflow: workflow, cron: cron?.expression, timeZone: cron?.timeZone, interval: interval,
            catchUp: catchUp, next: next, last: last)
    }
}

// Schedules: recorded, listed, removed, and their due slots fired, each slot once whichever process fires it.
extension SQLStorage {
    /// Records `schedule` (replacing one with its id: its next slot computed again, its last kept).
    func saveSchedule(_ schedule: StoredSchedule) async throws {
        let kind = schedule.catchUp.recorded
        var cron: SQLValue = .null
        var zone: SQLValue = .null
        var every: SQLValue = .null
        switch schedule.rule {
        case .cron(let expression):
            cron = .text(expression.expression)
            zone = .text(expression.timeZone.identifier)
        case .every(let seconds): every = .real(seconds)
        }
        let values: [SQLValue] = [
            .text(schedule.workflow), .blob(schedule.input), cron, zone, every, .text(kind.kind),
            .integer(Int64(kind.max)), schedule.next.map { .real($0.timeIntervalSince1970) } ?? .null,
        ]
        try await wrap {
            try await thread.perform(write: true) { [self] connection in
                try connection.query(
                    """
                    UPDATE schedules SET workflow = ?, input = ?, cron = ?, time_zone = ?, every = ?, catch_up = ?,
                        catch_up_max = ?, next = ?
                    WHERE id = ?
                    """, values + [.text(schedule.id)])
                if connection.changes == 0 {
                    try connection.query(
                        """
                        INSERT INTO schedules(workflow, input, cron, time_zone, every, catch_up, catch_up_max, next, id,
                            created)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """, values + [.text(schedule.id), .real(now)])
                }
                try notify(.ready, connection)
            }
        }
        announce(.ready)
    }

    func removeSchedule(id: String) async throws -> Bool {
        try await wrap {
            try await thread.perform(write: true) { connection in
                try connection.query("DELETE FROM schedules WHERE id = ?", [.text(id)])
                return connection.changes > 0
            }
        }
    }

    func loadSchedules() async throws -> [StoredSchedule] {
        try await wrap {
            try await thread.perform(write: false) { connection in
                try connection.query("SELECT \(StoredSchedule.columns) FROM schedules ORDER BY id").compactMap {
                    StoredSchedule(row: $0)
                }
            }
        }
    }

    /// The schedules of `workflows` whose next slot is due, and the earliest next slot of them all (when to
    /// look again).
    func dueSchedules(
        workflows: [String],
        completion: @escaping @Sendable (Result<(due: [StoredSchedule], next: Date?), any Error>) -> Void
    ) {
        guard !workflows.isEmpty else { return completion(.success(([], nil))) }
        let names = dialect.list(workflows)
        let isWorkflow = dialect.isIn("workflow")
        thread.submit(
            write: false,
            { [self] connection -> (due: [StoredSchedule], next: Date?) in
                let now = self.now
                let due = try connection.query(
                    "SELECT \(StoredSchedule.columns) FROM schedules WHERE next <= ? AND \(isWorkflow) ORDER BY next",
                    [.real(now), names]
                ).compactMap { StoredSchedule(row: $0) }
                let next = try connection.query(
                    "SELECT min(next) FROM schedules WHERE next > ? AND \(isWorkflow)", [.real(now), names]
                ).first?[0].double
                return (due, next.map(Date.init(timeIntervalSince1970:)))
            }, completion: completion)
    }

    /// Fires schedule `schedule`'s slots: in one transaction, only if its next slot is still `expected`
    /// (no other process fired it meanwhile; its row locked on a server), the runs not recorded yet are
    /// recorded and its next and last slots move on. Returns whether it fired.
    func fire(
        schedule: String, expected: Date, runs: [NewRun], next: Date?, last: Date?,
        completion: @escaping @Sendable (Result<Bool, any Error>) -> Void
    ) {
        let dialect = dialect
        thread.submit(
            write: true,
            { [self] connection -> Bool in
                guard
                    let row = try connection.query(
                        "SELECT next FROM schedules WHERE id = ?\(dialect.rowLock)", [.text(schedule)]
                    ).first, row[0].double == expected.timeIntervalSince1970
                else { return false }
                let existing = Set(
                    try connection.query(
                        "SELECT id FROM runs WHERE \(dialect.isIn("id"))", [dialect.list(runs.map(\.id))]
                    ).compactMap { $0[0].string })
                let fresh = runs.filter { !existing.contains($0.id) }
                try insertRuns(fresh, connection)
                try connection.query(
                    "UPDATE schedules SET next = ?, last = COALESCE(?, last) WHERE id = ?",
                    [
                        next.map { .real($0.timeIntervalSince1970) } ?? .null,
                        last.map { .real($0.timeIntervalSince1970) } ?? .null, .text(schedule),
                    ])
                if !fresh.isEmpty { try notify(.ready, connection) }
                return true
            },
            completion: { [self] result in
                if case .success(true) = result { announce(.ready) }
                completion(result)
            })
    }
}
