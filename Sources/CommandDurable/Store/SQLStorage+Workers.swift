import CommandCore
import Foundation

// What workers claim: the ready steps of any run, in one statement, with what they need to run (the
// run's input, the recorded values of the steps they come after).
extension SQLStorage {
    /// The columns a claim returns (`ClaimedStep`), the run's input among them.
    static let claimedColumns = """
        run_id, step_id, position, attempt, failures, workflow, after,
            (SELECT input FROM runs WHERE runs.id = steps.run_id),
            (SELECT context FROM runs WHERE runs.id = steps.run_id), queued
        """

    /// What a claim sets on the rows it takes (bindings: owner, lease end, now, token).
    static let claimSet = """
        state = 'running', owner = ?, lease_until = ?, attempt = attempt + 1, started = ?,
            next_attempt_at = NULL, claim = ?
        """

    /// Claims up to `limit` ready steps of the `workflows` (this process registered them), of higher
    /// priority first, then of the oldest run, in one transaction: pending steps whose predecessors all
    /// completed and whose backoff (or sleep, or delayed start) is over; with `takeOver`, first the running steps of other owners whose lease expired (or, on SQLite,
    /// whose process is gone). Each comes with its run's input and the recorded values of the steps it
    /// comes after: nothing is read again before it runs. A claim run again after a lost connection
    /// finds the rows it took (its token) instead of taking others.
    func claimReady(
        workflows: [String], limit: Int, takeOver: Bool,
        completion: @escaping @Sendable (Result<[ClaimedStep], any Error>) -> Void
    ) {
        guard !workflows.isEmpty, limit > 0 else { return completion(.success([])) }
        let owner = owner
        let lease = leaseSeconds
        let token = makeToken()
        let dialect = dialect
        let names = dialect.list(workflows)
        let runs = RunCount()
        thread.submit(
            write: true,
            { [self] connection -> [ClaimedStep] in
                let now = self.now
                runs.count += 1
                var taken: [(row: [SQLValue], tookOver: Bool)] = []
                if runs.count > 1 {
                    taken += try connection.query(
                        "SELECT \(Self.claimedColumns) FROM steps WHERE owner = ? AND claim = ? AND state = 'running'",
                        [.text(owner), .text(token)]
                    ).map { ($0, false) }
                }
                if takeOver && taken.count < limit {
                    let dead = try deadOwners(connection)
                    taken += try connection.query(
                        """
                        WITH picked AS MATERIALIZED (
                            SELECT run_id, step_id FROM steps
                            WHERE state = 'running' AND owner <> ? AND (lease_until < ? OR \(dialect.isIn("owner")))
                                AND \(dialect.isIn("workflow"))
                            ORDER BY lease_until LIMIT ?\(dialect.claimLock))
                        UPDATE steps SET \(Self.claimSet)
                        WHERE (run_id, step_id) IN (SELECT run_id, step_id FROM picked)
                        RETURNING \(Self.claimedColumns)
                        """,
                        [
                            .text(owner), .real(now), dialect.list(dead), names, .integer(Int64(limit - taken.count)),
                            .text(owner), .real(now + lease), .real(now), .text(token),
                        ]
                    ).map { ($0, true) }
                }
                if taken.count < limit {
                    taken += try connection.query(
                        """
                        WITH picked AS MATERIALIZED (
                            SELECT run_id, step_id FROM steps
                            WHERE state = 'pending' AND waiting = 0 AND \(dialect.isIn("workflow"))
                                AND (next_attempt_at IS NULL OR next_attempt_at <= ?) AND queue IS NULL
                            ORDER BY priority DESC, queued LIMIT ?\(dialect.claimLock))
                        UPDATE steps SET \(Self.claimSet)
                        WHERE (run_id, step_id) IN (SELECT run_id, step_id FROM picked)
                        RETURNING \(Self.claimedColumns)
                        """,
                        [
                            names, .real(now), .integer(Int64(limit - taken.count)), .text(owner), .real(now + lease),
                            .real(now), .text(token),
                        ]
                    ).map { ($0, false) }
                }
                // Steps of queues: their limits held, one queue at a time.
                if taken.count < limit {
                    taken += try claimQueued(
                        workflows: names, limit: limit - taken.count, owner: owner, token: token, connection
                    ).map { ($0, false) }
                }
                return try claimed(taken, connection)
            }, completion: completion)
    }

    /// The claimed rows as `ClaimedStep`s, with the recorded values of the steps each comes after (one
    /// statement for them all).
    func claimed(_ taken: [(row: [SQLValue], tookOver: Bool)], _ connection: any SQLDatabase) throws
        -> [ClaimedStep]
    {
        guard !taken.isEmpty else { return [] }
        let afters = taken.map { ($0.row[6].string ?? "").split(separator: ",").compactMap { Int($0) } }
        var values: [String: [Int: Data?]] = [:]
        let wanted = Set(afters.joined())
        if !wanted.isEmpty {
            for row in try connection.query(
                """
                SELECT run_id, position, value FROM steps
                WHERE \(dialect.isIn("run_id")) AND state = 'completed' AND \(dialect.isInIntegers("position"))
                """, [dialect.list(Set(taken.compactMap { $0.row[0].string })), dialect.list(wanted.sorted())])
            {
                guard let run = row[0].string, let position = row[1].int else { continue }
                values[run, default: [:]][Int(position)] = .some(row[2].data)
            }
        }
        return taken.indices.map { index in
            let recorded = values[taken[index].row[0].string ?? ""] ?? [:]
            return ClaimedStep(
                row: taken[index].row, tookOver: taken[index].tookOver,
                values: recorded.filter { afters[index].contains($0.key) })
        }
    }

    /// The owners of running steps whose process is gone (SQLite: processes of one host); none on a
    /// server, where leases alone decide.
    private func deadOwners(_ connection: any SQLDatabase) throws -> [String] {
        guard dialect.judgesOwnerProcesses else { return [] }
        return try connection.query(
            "SELECT DISTINCT owner FROM steps WHERE state = 'running' AND owner <> ?", [.text(owner)]
        ).compactMap { $0[0].string }.filter { isDead(owner: $0, connection) }
    }

    /// Gives back a claim this process will not run (its worker stopped meanwhile): the step is pending
    /// again, its attempt not counted.
    func release(run: String, step: String, attempt: Int) {
        let owner = owner
        thread.submit(
            write: true,
            { connection in
                try connection.query(
                    """
                    UPDATE steps SET state = 'pending', owner = NULL, lease_until = NULL, attempt = attempt - 1,
                        claim = NULL
                    WHERE run_id = ? AND step_id = ? AND owner = ? AND attempt = ? AND state = 'running'
                    """, [.text(run), .text(step), .text(owner), .integer(Int64(attempt))])
                if connection.changes == 1 { try self.notify(.ready, connection) }
            }, completion: { [self] _ in announce(.ready) })
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

}

/// How many times a request's body ran (a batch run again after a lost connection runs it again): only
/// touched on the store's thread.
final class RunCount: @unchecked Sendable {
    // `@unchecked Sendable`: touched only by the request's body, on the store's one thread.
    var count = 0
}
