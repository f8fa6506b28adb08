import CommandCore
import Foundation

/// What a sleep's or an event's wait found when its step began (or began again).
enum WaitAnswer: Sendable {
    /// Over: complete the step with this value (an event's value sent, `null` for an event timed out,
    /// nil for a sleep).
    case due(Data?)
    /// Not over: the step is pending again (its attempt not counted) until `until` (nil: until a value
    /// is sent), and holds no slot meanwhile.
    case waiting(until: Date?)
    /// The claim no longer holds the step: its record decides.
    case refused
}

// Time and events: a sleep's or an event's wait, a value sent to a run, deadlines.
extension SQLStorage {
    /// Far in the future: the `due` of an event wait without a timeout (recorded, so it is seen begun).
    static let never: Double = 1e15

    /// Begins (or goes on with) the wait of step `step`, claimed at `attempt`: its end (`due`) is recorded
    /// the first time, by the database's clock (`now + seconds`, or `until`); then it is over (an event's
    /// value was sent, or `due` passed) or the step goes back to pending until `due`, its attempt given
    /// back. In one transaction, the row locked against a concurrent `send`.
    func wait(
        run: String, step: String, attempt: Int, seconds: TimeInterval?, until: Date?, event: Bool,
        completion: @escaping @Sendable (Result<WaitAnswer, any Error>) -> Void
    ) {
        let owner = owner
        thread.submit(
            write: true, hop: false,
            { [self] connection -> WaitAnswer in
                let now = self.now
                let key: [SQLValue] = [.text(run), .text(step), .integer(Int64(attempt)), .text(owner)]
                guard
                    let row = try connection.query(
                        """
                        SELECT due, event FROM steps
                        WHERE run_id = ? AND step_id = ? AND attempt = ? AND owner = ? AND state = 'running'\(dialect.rowLock)
                        """, key
                    ).first
                else { return .refused }
                var due = row[0].double
                if due == nil {
                    let end = until?.timeIntervalSince1970 ?? seconds.map { now + $0 } ?? Self.never
                    try connection.query(
                        "UPDATE steps SET due = ? WHERE run_id = ? AND step_id = ?",
                        [.real(end), .text(run), .text(step)])
                    due = end
                }
                if event, let sent = row[1].data { return .due(sent) }
                let end = due ?? Self.never
                if end <= now { return .due(event ? Data("null".utf8) : nil) }
                try connection.query(
                    """
                    UPDATE steps SET state = 'pending', owner = NULL, lease_until = NULL, claim = NULL,
                        attempt = attempt - 1, next_attempt_at = ?
                    WHERE run_id = ? AND step_id = ? AND attempt = ? AND owner = ? AND state = 'running'
                    """, [.real(end)] + key)
                return .waiting(until: end >= Self.never ? nil : Date(timeIntervalSinceNow: end - now))
            }, completion: completion)
    }

    /// Records `value` as the event `step`'s of run `run` (a mailbox: whether or not its wait began); a
    /// wait begun is woken (its step ready at once, every process told).
    func send(_ value: Data, event step: String, run: String) async throws {
        try await wrap {
            try await thread.perform(write: true) { [self] connection in
                guard
                    let state = try connection.query("SELECT state FROM runs WHERE id = ?", [.text(run)]).first?[0]
                        .string
                else { throw DurableError.unknownRun(run) }
                if DurableRunState(rawValue: state)?.isEnded ?? false { throw DurableError.runEnded(run) }
                guard
                    let row = try connection.query(
                        "SELECT state, event FROM steps WHERE run_id = ? AND step_id = ?\(dialect.rowLock)",
                        [.text(run), .text(step)]
                    ).first
                else { throw DurableError.unknownEvent(run: run, event: step) }
                if row[1].data != nil { throw DurableError.eventAlreadySent(run: run, event: step) }
                if row[0].string != DurableRunState.pending.rawValue
                    && row[0].string != DurableRunState.running.rawValue
                {
                    throw DurableError.eventClosed(run: run, event: step)
                }
                // A wait begun (`due` recorded) is ready at once; one not begun finds the value when it begins.
                try connection.query(
                    """
                    UPDATE steps SET event = ?,
                        next_attempt_at = CASE WHEN state = 'pending' AND due IS NOT NULL THEN NULL ELSE next_attempt_at END
                    WHERE run_id = ? AND step_id = ?
                    """, [.blob(value), .text(run), .text(step)])
                try notify(.ready, connection)
                try notify(.event(run: run), connection)
            }
        }
        announce(.ready)
        announce(.event(run: run))
    }

    /// Ends, failed with ``DurableError/deadlineExceeded(run:)``, the runs not ended whose deadline passed
    /// (up to 100 a look): their steps not ended are marked cancelled (never to run; a running one's
    /// completion is refused), and every process is told. Returns their ids.
    func expireDeadlines(completion: @escaping @Sendable ([String]) -> Void) {
        // A read first (a look finds none almost always), the writes only for runs found.
        thread.submit(
            write: false,
            { [self] connection -> [String] in
                try connection.query(
                    """
                    SELECT id FROM runs WHERE state IN ('pending', 'running') AND deadline IS NOT NULL AND deadline <= ?
                    ORDER BY deadline LIMIT 100
                    """, [.real(self.now)]
                ).compactMap { $0[0].string }
            },
            completion: { [self] result in
                let due = (try? result.get()) ?? []
                guard !due.isEmpty else { return completion([]) }
                expire(due, completion: completion)
            })
    }

    private func expire(_ runs: [String], completion: @escaping @Sendable ([String]) -> Void) {
        thread.submit(
            write: true,
            { [self] connection -> [String] in
                let now = self.now
                var expired: [String] = []
                for run in runs {
                    try connection.query(
                        """
                        UPDATE runs SET state = 'failed', updated = ?, error = ?, error_kind = 'deadlineExceeded',
                            error_step = NULL
                        WHERE id = ? AND state IN ('pending', 'running') AND deadline <= ?
                        """,
                        [
                            .real(now), .text(String(describing: DurableError.deadlineExceeded(run: run))), .text(run),
                            .real(now),
                        ])
                    guard connection.changes == 1 else { continue }
                    expired.append(run)
                    try connection.query(
                        """
                        UPDATE steps SET state = 'cancelled', owner = NULL, lease_until = NULL, ended = ?,
                            error = 'the run passed its deadline'
                        WHERE run_id = ? AND state IN ('pending', 'running')
                        """, [.real(now), .text(run)])
                    try notify(.deadline(run: run), connection)
                    try notify(.ended(run: run), connection)
                    try wakeParent(of: run, connection)
                }
                return expired
            },
            completion: { [self] result in
                let expired = (try? result.get()) ?? []
                for run in expired {
                    announce(.deadline(run: run))
                    announce(.ended(run: run))
                }
                completion(expired)
            })
    }
}
