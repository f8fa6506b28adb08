import CommandCore
import Foundation

// A failed or cancelled run, run again from where it failed.
extension SQLStorage {
    /// Makes run `run` (failed or cancelled) run again from where it ended: its completed steps kept, its
    /// failed and cancelled steps pending again (their attempt numbers go on; failures counted anew),
    /// each step's count of unfinished predecessors made again, the run `running` without its error,
    /// cancel or deadline. One transaction; every process told.
    func retry(run: String) async throws {
        try await wrap {
            try await thread.perform(write: true) { [self] connection in
                guard
                    let state = try connection.query(
                        "SELECT state FROM runs WHERE id = ?\(dialect.rowLock)", [.text(run)]
                    )
                    .first?[0].string.flatMap(DurableRunState.init(rawValue:))
                else { throw DurableError.unknownRun(run) }
                guard state == .failed || state == .cancelled else {
                    throw DurableError.notRetryable(run: run, state: state)
                }
                let now = self.now
                try connection.query(
                    """
                    UPDATE runs SET state = 'running', cancel_requested = 0, error = NULL, error_kind = NULL,
                        error_step = NULL, deadline = NULL, updated = ?
                    WHERE id = ?
                    """, [.real(now), .text(run)])
                try connection.query(
                    """
                    UPDATE steps SET state = 'pending', failures = 0, owner = NULL, lease_until = NULL, claim = NULL,
                        next_attempt_at = NULL, ended = NULL
                    WHERE run_id = ? AND state IN ('failed', 'cancelled')
                    """, [.text(run)])
                // Each pending step's predecessors not completed, counted again.
                let rows = try connection.query(
                    "SELECT step_id, position, after, state FROM steps WHERE run_id = ?", [.text(run)])
                var completed = Set<Int>()
                for row in rows where row[3].string == DurableRunState.completed.rawValue {
                    if let position = row[1].int { completed.insert(Int(position)) }
                }
                for row in rows where row[3].string != DurableRunState.completed.rawValue {
                    let after = Set((row[2].string ?? "").split(separator: ",").compactMap { Int($0) })
                    try connection.query(
                        "UPDATE steps SET waiting = ? WHERE run_id = ? AND step_id = ?",
                        [.integer(Int64(after.subtracting(completed).count)), .text(run), row[0]])
                }
                try notify(.ready, connection)
            }
        }
        announce(.ready)
    }
}
