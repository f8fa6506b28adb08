import CommandCore
import Foundation

/// What the step of a child run found.
enum ChildAnswer: Sendable {
    /// The child run completed: its value (its final step's).
    case completed(Data?)
    /// The child run failed or was cancelled: why.
    case failed(String)
    /// The child run goes on (`created`: recorded by this step now); the step waits, pending, holding no
    /// slot, until the child's end wakes it.
    case waiting(created: Bool)
    /// The claim no longer holds the step: its record decides.
    case refused
}

// Child runs: recorded once by their parent's step, whose wait their end wakes.
extension SQLStorage {
    /// The step `step` of run `run`, claimed at `attempt`, records its child run `child` (once: a run with
    /// its id is kept), then reads its end: completed or failed, or still going (the step then waits,
    /// pending, its attempt given back). In one transaction, the step's row locked against the child's end.
    func startChild(
        run: String, step: String, attempt: Int, child: NewRun,
        completion: @escaping @Sendable (Result<ChildAnswer, any Error>) -> Void
    ) {
        let owner = owner
        thread.submit(
            write: true, hop: false,
            { [self] connection -> ChildAnswer in
                let key: [SQLValue] = [.text(run), .text(step), .integer(Int64(attempt)), .text(owner)]
                guard
                    try !connection.query(
                        """
                        SELECT 1 FROM steps
                        WHERE run_id = ? AND step_id = ? AND attempt = ? AND owner = ? AND state = 'running'\(dialect.rowLock)
                        """, key
                    ).isEmpty
                else { return .refused }
                var created = false
                if try connection.query("SELECT 1 FROM runs WHERE id = ?", [.text(child.id)]).isEmpty {
                    try insertRuns([child], connection)
                    try notify(.ready, connection)
                    created = true
                }
                let row = try connection.query(
                    "SELECT state, error, final_step FROM runs WHERE id = ?", [.text(child.id)]
                ).first
                switch DurableRunState(rawValue: row?[0].string ?? "") {
                case .completed?:
                    let value = try connection.query(
                        "SELECT value FROM steps WHERE run_id = ? AND step_id = ?", [.text(child.id), row![2]]
                    ).first?[0].data
                    return .completed(value)
                case .failed?:
                    return .failed("its child run '\(child.id)' failed: \(row?[1].string ?? "no error recorded")")
                case .cancelled?:
                    return .failed("its child run '\(child.id)' was cancelled")
                default:
                    try connection.query(
                        """
                        UPDATE steps SET state = 'pending', owner = NULL, lease_until = NULL, claim = NULL,
                            attempt = attempt - 1, next_attempt_at = ?, due = ?
                        WHERE run_id = ? AND step_id = ? AND attempt = ? AND owner = ? AND state = 'running'
                        """, [.real(Self.never), .real(Self.never)] + key)
                    return .waiting(created: created)
                }
            },
            completion: { [self] result in
                if case .success(.waiting(true)) = result { announce(.ready) }
                completion(result)
            })
    }

    /// A child run `run` ended: the step of its parent that waits for it is ready at once (every
    /// process told; this process hears of it by the child's end, `.ended`).
    func wakeParent(of run: String, _ connection: any SQLDatabase) throws {
        guard
            let row = try connection.query("SELECT parent, parent_step FROM runs WHERE id = ?", [.text(run)]).first,
            let parent = row[0].string, let step = row[1].string
        else { return }
        try connection.query(
            "UPDATE steps SET next_attempt_at = NULL WHERE run_id = ? AND step_id = ? AND state = 'pending'",
            [.text(parent), .text(step)])
        if connection.changes > 0 {
            try notify(.ready, connection)
            try notify(.event(run: parent), connection)
        }
    }
}
