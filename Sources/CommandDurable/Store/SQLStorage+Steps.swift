import CommandCore
import Foundation

// Steps: claimed (with the owner's liveness), completed (claiming what it makes ready), failed; every
// write fenced by the claim's attempt and owner.
extension SQLStorage {
    func claim(
        run: String, step: String, position: Int,
        completion: @escaping @Sendable (Result<ClaimResult, any Error>) -> Void
    ) {
        let owner = owner
        let lease = leaseSeconds
        let token = makeToken()
        thread.submit(
            write: true, hop: false,
            { [self] connection -> ClaimResult in
                let now = self.now
                guard
                    let runRow = try connection.query(
                        "SELECT state, cancel_requested, workflow, created, error_kind FROM runs WHERE id = ?",
                        [.text(run)]
                    ).first
                else { throw DurableError.storage(message: "run '\(run)' is not in the store") }
                if runRow[1].int == 1 || runRow[0].string == DurableRunState.cancelled.rawValue { return .runCancelled }
                if runRow[4].string == "deadlineExceeded" { return .deadlineExceeded }
                var row = try connection.query(
                    """
                    SELECT state, attempt, failures, owner, lease_until, value, error, next_attempt_at, claim, queue,
                        queue_key
                    FROM steps WHERE run_id = ? AND step_id = ?\(dialect.claimLock)
                    """, [.text(run), .text(step)]
                ).first
                if row == nil {
                    // Locked by another process's claim (skipped): held, ask again soon.
                    if !dialect.claimLock.isEmpty,
                        try !connection.query(
                            "SELECT 1 FROM steps WHERE run_id = ? AND step_id = ?", [.text(run), .text(step)]
                        ).isEmpty
                    {
                        return .held(until: Date(timeIntervalSinceNow: 0.05))
                    }
                    // A step the workflow makes now and did not when the run was recorded.
                    try connection.query(
                        """
                        INSERT INTO steps(run_id, step_id, position, state, workflow, queued)
                        VALUES (?, ?, ?, 'pending', ?, ?)
                        """, [.text(run), .text(step), .integer(Int64(position)), runRow[2], runRow[3]])
                    row = [
                        .text("pending"), .integer(0), .integer(0), .null, .null, .null, .null, .null, .null, .null,
                        .null,
                    ]
                }
                let fields = row!
                let attempt = Int(fields[1].int ?? 0)
                let failures = Int(fields[2].int ?? 0)
                var tookOver = false
                switch fields[0].string ?? "" {
                case "completed":
                    return .recorded(fields[5].data)
                case "failed":
                    return .failed(message: fields[6].string ?? "failed")
                case "cancelled":
                    // The run was not cancelled (checked above): a step it comes after failed for good.
                    return .failed(message: fields[6].string ?? "it did not run: a step it comes after failed")
                case "running":
                    let holder = fields[3].string ?? ""
                    // This very claim, committed before a lost connection's retry.
                    if holder == owner && fields[8].string == token {
                        return .claimed(attempt: attempt, failures: failures, tookOver: false)
                    }
                    let until = fields[4].double ?? 0
                    // Another claim of this process (a worker's) holds it like another process's would.
                    if holder == owner || (until >= now && !isDead(owner: holder, connection)) {
                        return .held(until: Date(timeIntervalSinceNow: max(until - now, 0.01)))
                    }
                    tookOver = true
                default:
                    if let next = fields[7].double, next > now {
                        return .notBefore(Date(timeIntervalSinceNow: next - now))
                    }
                }
                // A step of a queue waits for its place (a step taken over keeps the place it had).
                if !tookOver, let queue = fields[9].string,
                    let again = try admits(queue: queue, key: fields[10].string, connection)
                {
                    return .held(until: again)
                }
                try connection.query(
                    "UPDATE steps SET \(Self.claimSet) WHERE run_id = ? AND step_id = ?",
                    [.text(owner), .real(now + lease), .real(now), .text(token), .text(run), .text(step)])
                return .claimed(attempt: attempt + 1, failures: failures, tookOver: tookOver)
            }, completion: completion)
    }

    /// An owner on this host whose process is gone (or whose pid now belongs to a later process).
    /// Another host's owner, and every owner of a server's store, is judged by its leases only.
    func isDead(owner: String, _ connection: any SQLDatabase) -> Bool {
        guard dialect.judgesOwnerProcesses else { return false }
        guard
            let row = try? connection.query("SELECT host, pid, process_start FROM owners WHERE id = ?", [.text(owner)])
                .first
        else { return true }
        guard row[0].string == ProcessIdentity.host, let pid = row[1].int else { return false }
        return !ProcessIdentity.isAlive(pid: Int32(pid), startTime: row[2].double)
    }

    /// Records step `step` (at `position`) completed with `value`, fenced by this owner's claim and
    /// `attempt`; in the same transaction, the steps after it (`dependents`, by id: each found by its key,
    /// whatever the run's size) count one predecessor less, up to `hand` of
    /// those it made ready are claimed for this process (returned with their input and values when
    /// `withValues`), and the run ends if it was its last step.
    func complete(
        run: String, step: String, position: Int, dependents: [String], attempt: Int, value: Data?, hand: Int,
        withValues: Bool, completion: @escaping @Sendable (Result<CompleteResult, any Error>) -> Void
    ) {
        let owner = owner
        let lease = leaseSeconds
        let token = makeToken()
        let dependents = dialect.list(dependents)
        let isDependent = dialect.isIn("step_id")
        thread.submit(
            write: true, hop: false,
            { [self] connection -> CompleteResult in
                let now = self.now
                try connection.query(
                    """
                    UPDATE steps SET state = 'completed', value = ?, ended = ?, lease_until = NULL
                    WHERE run_id = ? AND step_id = ? AND attempt = ? AND owner = ? AND state = 'running'
                    """,
                    [
                        value.map { .blob($0) } ?? .null, .real(now), .text(run), .text(step),
                        .integer(Int64(attempt)), .text(owner),
                    ])
                // Refused, unless this very completion was committed before a lost connection's retry.
                let again =
                    connection.changes == 1
                    ? false
                    : try !connection.query(
                        """
                        SELECT 1 FROM steps WHERE run_id = ? AND step_id = ? AND attempt = ? AND owner = ?
                            AND state = 'completed'
                        """, [.text(run), .text(step), .integer(Int64(attempt)), .text(owner)]
                    ).isEmpty
                guard connection.changes == 1 || again else {
                    return CompleteResult(recorded: false, handed: [], endedRun: false)
                }
                var taken: [[SQLValue]] = []
                // Steps after this one still pending: the run cannot have ended with it.
                var stepsLeft = false
                if again {
                    // Committed already: what it handed over then is this owner's, running, and not begun.
                    taken = try connection.query(
                        """
                        SELECT \(Self.claimedColumns) FROM steps WHERE run_id = ? AND owner = ? AND state = 'running'
                            AND \(isDependent)
                        """, [.text(run), .text(owner), dependents])
                } else {
                    let counts = try connection.query(
                        """
                        UPDATE steps SET waiting = waiting - 1
                        WHERE run_id = ? AND \(isDependent) AND state = 'pending'
                        RETURNING waiting
                        """, [.text(run), dependents])
                    stepsLeft = !counts.isEmpty
                    let madeReady = counts.filter { $0[0].int == 0 }.count
                    if madeReady > 0 && hand > 0 {
                        // The steps made ready by this one, claimed in the same transaction (a chain's next
                        // step needs no claim of its own). Found by their keys: `waiting < 1`, not `= 0`,
                        // keeps PostgreSQL's generic plan off the index of every ready step (`ready_steps`,
                        // whose scan grows with the backlog: measured 2.2 ms a statement at 10,000 waiting
                        // runs, 0.06 ms at 100).
                        taken = try connection.query(
                            """
                            WITH picked AS MATERIALIZED (
                                SELECT step_id FROM steps
                                WHERE run_id = ? AND \(isDependent) AND state = 'pending' AND waiting < 1
                                    AND (next_attempt_at IS NULL OR next_attempt_at <= ?) AND queue IS NULL
                                ORDER BY position LIMIT ?\(dialect.claimLock))
                            UPDATE steps SET \(Self.claimSet)
                            WHERE run_id = ? AND step_id IN (SELECT step_id FROM picked)
                            RETURNING \(Self.claimedColumns)
                            """,
                            [
                                .text(run), dependents, .real(now), .integer(Int64(hand)), .text(owner),
                                .real(now + lease), .real(now), .text(token), .text(run),
                            ])
                    }
                    // Other processes are told only of what is left for them: ready steps not handed here.
                    if madeReady > taken.count { try notify(.ready, connection) }
                }
                // A chain's next step needs only this step's value, at hand: no read for it; the run
                // started here needs none (its values are in memory).
                let inHand = !withValues || taken.allSatisfy { $0[6].string == "\(position)" }
                let handed =
                    inHand
                    ? taken.map { ClaimedStep(row: $0, tookOver: false, values: withValues ? [position: value] : [:]) }
                    : try claimed(taken.map { ($0, false) }, connection)
                let ended = stepsLeft ? false : try endRunIfDone(run, connection)
                return CompleteResult(recorded: true, handed: handed, endedRun: ended)
            },
            completion: { [self] result in
                if case .success(let answer) = result, answer.recorded {
                    announce(.ready)
                    if answer.endedRun { announce(.ended(run: run)) }
                }
                completion(result)
            })
    }

    func fail(
        run: String, step: String, attempt: Int, error: String, errorType: String, retryAfter: TimeInterval?,
        completion: @escaping @Sendable (Result<Bool, any Error>) -> Void
    ) {
        let owner = owner
        thread.submit(
            write: true, hop: false,
            { [self] connection -> (recorded: Bool, endedRun: Bool) in
                try connection.query(
                    """
                    UPDATE steps SET state = ?, failures = failures + 1, error = ?, error_type = ?,
                        next_attempt_at = ?, ended = ?, lease_until = NULL
                    WHERE run_id = ? AND step_id = ? AND attempt = ? AND owner = ? AND state = 'running'
                    """,
                    [
                        .text(retryAfter == nil ? "failed" : "pending"), .text(error), .text(errorType),
                        retryAfter.map { .real(now + $0) } ?? .null,
                        .real(self.now), .text(run), .text(step), .integer(Int64(attempt)),
                        .text(owner),
                    ])
                if connection.changes == 1 {
                    try notify(.ready, connection)
                    guard retryAfter == nil else { return (true, false) }
                    // For good: the steps after it never run; the run ends once no step is left running.
                    try skipSteps(after: step, of: run, connection)
                    return (true, try endRunIfDone(run, connection))
                }
                // Recorded already, when this very failure was committed before a lost connection's retry.
                let again = try !connection.query(
                    """
                    SELECT 1 FROM steps WHERE run_id = ? AND step_id = ? AND attempt = ? AND owner = ?
                        AND state IN ('pending', 'failed') AND ended IS NOT NULL
                    """, [.text(run), .text(step), .integer(Int64(attempt)), .text(owner)]
                ).isEmpty
                return (again, false)
            },
            completion: { [self] result in
                if case .success(let answer) = result, answer.recorded {
                    announce(.ready)
                    if answer.endedRun { announce(.ended(run: run)) }
                }
                completion(result.map(\.recorded))
            })
    }

    /// The rule for a run's end, whoever runs it (a start, a resume, a worker of any process), applied in
    /// the transaction of each step's end: the run ends when no step of it is pending or running. It
    /// failed if a step failed for good (the first to fail, recorded), and completed otherwise (its value
    /// is the final step's). Returns whether it ended now.
    func endRunIfDone(_ run: String, _ connection: any SQLDatabase) throws -> Bool {
        let left = try connection.query(
            "SELECT 1 FROM steps WHERE run_id = ? AND state IN ('pending', 'running') LIMIT 1", [.text(run)])
        guard left.isEmpty else { return false }
        let failed = try connection.query(
            """
            SELECT step_id, error FROM steps WHERE run_id = ? AND state = 'failed' ORDER BY ended, position LIMIT 1
            """, [.text(run)]
        ).first
        let now = self.now
        if let failed {
            try connection.query(
                """
                UPDATE runs SET state = 'failed', updated = ?, error = ?, error_kind = 'stepFailed', error_step = ?
                WHERE id = ? AND state IN ('pending', 'running')
                """, [.real(now), failed[1], failed[0], .text(run)])
        } else {
            try connection.query(
                "UPDATE runs SET state = 'completed', updated = ? WHERE id = ? AND state IN ('pending', 'running')",
                [.real(now), .text(run)])
        }
        guard connection.changes == 1 else { return false }
        try notify(.ended(run: run), connection)
        try wakeParent(of: run, connection)
        return true
    }

    /// Marks cancelled (never to run) the pending steps that come after `step`, directly or not: a step
    /// that failed for good.
    func skipSteps(after step: String, of run: String, _ connection: any SQLDatabase) throws {
        let rows = try connection.query(
            "SELECT step_id, position, after, state FROM steps WHERE run_id = ?", [.text(run)])
        var dependents: [Int: [Int]] = [:]
        var ids: [Int: String] = [:]
        var failedPosition: Int?
        for row in rows {
            guard let position = row[1].int.map(Int.init) else { continue }
            ids[position] = row[0].string
            if row[0].string == step { failedPosition = position }
            for before in (row[2].string ?? "").split(separator: ",").compactMap({ Int($0) }) {
                dependents[before, default: []].append(position)
            }
        }
        guard let failedPosition else { return }
        var doomed: Set<Int> = []
        var next = dependents[failedPosition] ?? []
        while let position = next.popLast() {
            if doomed.insert(position).inserted { next += dependents[position] ?? [] }
        }
        for position in doomed.sorted() {
            try connection.query(
                """
                UPDATE steps SET state = 'cancelled', owner = NULL, ended = ?, error = ?
                WHERE run_id = ? AND position = ? AND state = 'pending'
                """,
                [
                    .real(self.now), .text("it did not run: step '\(step)', which it comes after, failed"),
                    .text(run), .integer(Int64(position)),
                ])
        }
    }
}
