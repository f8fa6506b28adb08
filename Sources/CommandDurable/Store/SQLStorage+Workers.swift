import CommandCore
import Foundation

// What workers read: the steps ready to claim from any run, the recorded values they need, a run's state.
extension SQLStorage {
    func readySteps(
        workflows: [String], excluding busy: Set<String>, limit: Int,
        completion: @escaping @Sendable (Result<[ReadyStep], any Error>) -> Void
    ) {
        guard !workflows.isEmpty, limit > 0 else { return completion(.success([])) }
        thread.submit(
            write: false,
            { [self] connection -> [ReadyStep] in
                let now = Self.now
                let names = workflows.map { _ in "?" }.joined(separator: ", ")
                // Ready in SQL: every step it comes after is completed (`after` holds their positions,
                // comma-separated); pending past its backoff, or running with a lease that ended (or, where
                // owners' processes are judged, any running one: checked below).
                let candidates = try connection.query(
                    """
                    SELECT s.run_id, s.step_id, s.position, s.state, s.owner, s.lease_until, r.workflow
                    FROM steps s JOIN runs r ON r.id = s.run_id
                    WHERE r.state IN ('pending', 'running') AND r.cancel_requested = 0 AND r.workflow IN (\(names))
                        AND ((s.state = 'pending' AND (s.next_attempt_at IS NULL OR s.next_attempt_at <= ?))
                            OR (s.state = 'running' AND (s.lease_until < ? OR ? = 1)))
                        AND NOT EXISTS (SELECT 1 FROM steps d WHERE d.run_id = s.run_id AND d.state <> 'completed'
                            AND (',' || s.after || ',') LIKE ('%,' || d.position || ',%'))
                    ORDER BY r.created, s.position LIMIT ?
                    """,
                    workflows.map { .text($0) } + [
                        .real(now), .real(now), .integer(dialect.judgesOwnerProcesses ? 1 : 0),
                        .integer(Int64(limit + busy.count + 64)),
                    ])
                var dead: [String: Bool] = [:]
                var ready: [ReadyStep] = []
                for row in candidates {
                    guard ready.count < limit else { break }
                    let run = row[0].string ?? "", step = row[1].string ?? ""
                    if busy.contains("\(run)/\(step)") { continue }
                    // A running step is ready only when its owner lost it: lease expired, or process gone.
                    if row[3].string == "running", (row[5].double ?? 0) >= now {
                        let holder = row[4].string ?? ""
                        if dead[holder] == nil { dead[holder] = isDead(owner: holder, connection) }
                        if dead[holder] != true { continue }
                    }
                    ready.append(
                        ReadyStep(
                            run: run, workflow: row[6].string ?? "", step: step, position: Int(row[2].int ?? 0)))
                }
                return ready
            }, completion: completion)
    }

    func stepValues(
        run: String, positions: [Int], completion: @escaping @Sendable (Result<[Int: Data?], any Error>) -> Void
    ) {
        thread.submit(
            write: false,
            { connection -> [Int: Data?] in
                var values: [Int: Data?] = [:]
                for position in positions {
                    let row = try connection.query(
                        "SELECT value, state FROM steps WHERE run_id = ? AND position = ?",
                        [.text(run), .integer(Int64(position))]
                    ).first
                    guard let row, row[1].string == "completed" else { continue }
                    values[position] = row[0].data
                }
                return values
            }, completion: completion)
    }

    func runState(_ id: String, completion: @escaping @Sendable (Result<StoredRun?, any Error>) -> Void) {
        thread.submit(write: false, { try Self.loadRun(id, $0) }, completion: completion)
    }
}
