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
                let now = self.now
                let names = workflows.map { _ in "?" }.joined(separator: ", ")
                let candidates = try connection.query(
                    """
                    SELECT s.run_id, s.step_id, s.position, s.after, s.state, s.owner, s.lease_until, r.workflow
                    FROM steps s JOIN runs r ON r.id = s.run_id
                    WHERE r.state IN ('pending', 'running') AND r.cancel_requested = 0 AND r.workflow IN (\(names))
                        AND ((s.state = 'pending' AND (s.next_attempt_at IS NULL OR s.next_attempt_at <= ?))
                            OR s.state = 'running')
                    ORDER BY r.created, s.position LIMIT 1000
                    """, workflows.map { .text($0) } + [.real(now)])
                var dead: [String: Bool] = [:]
                var completed: [String: Set<Int>] = [:]
                var ready: [ReadyStep] = []
                for row in candidates {
                    guard ready.count < limit else { break }
                    let run = row[0].string ?? "", step = row[1].string ?? ""
                    if busy.contains("\(run)/\(step)") { continue }
                    // A running step is ready only when its owner lost it: lease expired, or process gone.
                    if row[4].string == "running", (row[6].double ?? 0) >= now {
                        let holder = row[5].string ?? ""
                        if dead[holder] == nil { dead[holder] = isDead(owner: holder, connection) }
                        if dead[holder] != true { continue }
                    }
                    let after = (row[3].string ?? "").split(separator: ",").compactMap { Int($0) }
                    if completed[run] == nil {
                        completed[run] = Set(
                            try connection.query(
                                "SELECT position FROM steps WHERE run_id = ? AND state = 'completed'", [.text(run)]
                            ).compactMap { $0[0].int.map(Int.init) })
                    }
                    guard after.allSatisfy({ completed[run]!.contains($0) }) else { continue }
                    ready.append(
                        ReadyStep(
                            run: run, workflow: row[7].string ?? "", step: step, position: Int(row[2].int ?? 0)))
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
                // One statement: the run's completed steps, kept where asked for.
                let wanted = Set(positions)
                var values: [Int: Data?] = [:]
                for row in try connection.query(
                    "SELECT position, value FROM steps WHERE run_id = ? AND state = 'completed'", [.text(run)])
                {
                    guard let position = row[0].int.map(Int.init), wanted.contains(position) else { continue }
                    values[position] = row[1].data
                }
                return values
            }, completion: completion)
    }

    func runState(_ id: String, completion: @escaping @Sendable (Result<StoredRun?, any Error>) -> Void) {
        thread.submit(write: false, { try Self.loadRun(id, $0) }, completion: completion)
    }
}
