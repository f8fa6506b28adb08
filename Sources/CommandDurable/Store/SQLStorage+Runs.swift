import CommandCore
import Foundation

// Runs: recorded, read, ended, cancelled, listed, pruned (see `SQLStorage` for the schema).
extension SQLStorage {
    /// Records new runs (each with its input and every step, pending) in one transaction, or finds those
    /// the store already has (`failIfExists`: throws ``DurableError/runExists(_:)`` for the first such
    /// id, and records none). Rows go in statements of 100, 10 or 1 (one round trip each on a server; three
    /// statement texts whatever the count).
    func createRuns(_ runs: [NewRun], failIfExists: Bool) async throws -> [CreateRunResult] {
        guard !runs.isEmpty else { return [] }
        let dialect = dialect
        let created = try await wrap {
            try await thread.perform(
                write: true,
                { [self] connection -> [CreateRunResult] in
                    var existing: [String: StoredRun] = [:]
                    for chunk in stride(from: 0, to: runs.count, by: 1_000) {
                        let ids = runs[chunk..<min(chunk + 1_000, runs.count)].map(\.id)
                        let found = try connection.query(
                            "SELECT id FROM runs WHERE \(dialect.isIn("id"))", [dialect.list(ids)])
                        for row in found {
                            guard let id = row[0].string else { continue }
                            if failIfExists { throw DurableError.runExists(id) }
                            existing[id] = try Self.loadRun(id, connection)
                        }
                    }
                    let fresh = runs.filter { existing[$0.id] == nil }
                    try insertRuns(fresh, connection)
                    if !fresh.isEmpty { try notify(.ready, connection) }
                    return runs.map { run in existing[run.id].map { .exists($0) } ?? .created }
                },
                committed: { [self] created in
                    // At the commit, before any worker can claim their steps: the observers hear of the runs
                    // first, then the workers are told.
                    let fresh = zip(runs, created).filter { if case .created = $0.1 { true } else { false } }
                    for (run, _) in fresh {
                        observers.emit(
                            .runCreated, workflow: run.workflow, run: run.id, owner: owner, context: run.options.context
                        )
                    }
                    if !fresh.isEmpty { announce(.ready) }
                })
        }
        return created
    }

    /// Inserts `fresh` runs (none of them recorded yet) with their steps, in statements of 100, 10 or 1
    /// rows.
    func insertRuns(_ fresh: [NewRun], _ connection: any SQLDatabase) throws {
        let now = self.now
        try insert(
            """
            runs(id, workflow, input, state, created, updated, final_step, not_before, deadline, priority, tags, parent,
                parent_step, context)
            """,
            "(?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            fresh.map { run in
                let options = run.options
                return [
                    .text(run.id), .text(run.workflow), .blob(run.input), .real(now), .real(now),
                    .text(run.finalStep), options.notBefore.map { .real($0.timeIntervalSince1970) } ?? .null,
                    options.deadline.map { .real(now + $0.inSeconds) } ?? .null,
                    .integer(Int64(options.priority)), .text(options.recordedTags),
                    run.parent.map { .text($0.run) } ?? .null, run.parent.map { .text($0.step) } ?? .null,
                    options.recordedContext.map { .text($0) } ?? .null,
                ]
            }, connection)
        // A run not to begin before a date: each of its steps waits for it as for a backoff.
        try insert(
            """
            steps(run_id, step_id, position, state, after, waiting, workflow, queued, next_attempt_at, priority, queue,
                queue_key)
            """,
            "(?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?)",
            fresh.flatMap { run in
                let notBefore = run.options.notBefore.map { SQLValue.real($0.timeIntervalSince1970) } ?? .null
                return run.steps.indices.map { position -> [SQLValue] in
                    let after = run.after[position]
                    let queue = position < run.queues.count ? run.queues[position] : nil
                    return [
                        .text(run.id), .text(run.steps[position]), .integer(Int64(position)),
                        .text(after.map(String.init).joined(separator: ",")),
                        .integer(Int64(Set(after).count)), .text(run.workflow), .real(now), notBefore,
                        .integer(Int64(run.options.priority)), queue.map { .text($0.queue.name) } ?? .null,
                        queue?.key.map { .text($0) } ?? .null,
                    ]
                }
            }, connection)
        // The queues' limits, as this process declares them: the last recorded are those enforced.
        var declared: [String: DurableQueue] = [:]
        for run in fresh { for case let queue? in run.queues { declared[queue.queue.name] = queue.queue } }
        for queue in declared.values.sorted(by: { $0.name < $1.name }) {
            let limits: [SQLValue] = [
                queue.concurrency.map { .integer(Int64($0)) } ?? .null,
                queue.perKey.map { .integer(Int64($0)) } ?? .null,
                queue.rate.map { .integer(Int64($0.count)) } ?? .null,
                queue.rate.map { .real($0.period.inSeconds) } ?? .null,
            ]
            // One statement: two processes recording the same new queue at once never both insert it.
            try connection.query(
                """
                INSERT INTO queues(concurrency, per_key, rate_count, rate_seconds, name) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, per_key = excluded.per_key,
                    rate_count = excluded.rate_count, rate_seconds = excluded.rate_seconds
                """, limits + [.text(queue.name)])
        }
    }

    /// Inserts `rows` into `table` (its columns named) in statements of 100, 10 or 1 rows of `shape`.
    private func insert(_ table: String, _ shape: String, _ rows: [[SQLValue]], _ connection: any SQLDatabase)
        throws
    {
        var start = 0
        for size in [100, 10, 1] {
            let text = "INSERT INTO \(table) VALUES " + Array(repeating: shape, count: size).joined(separator: ", ")
            while rows.count - start >= size {
                try connection.query(text, rows[start..<start + size].flatMap { $0 })
                start += size
            }
        }
    }

    func loadRun(_ id: String) async throws -> StoredRun? {
        try await wrap { try await thread.perform(write: false) { try Self.loadRun(id, $0) } }
    }

    static func loadRun(_ id: String, _ connection: any SQLDatabase) throws -> StoredRun? {
        guard
            let row = try connection.query(
                """
                SELECT workflow, input, state, cancel_requested, error, error_kind, error_step, final_step, context,
                    created
                FROM runs WHERE id = ?
                """, [.text(id)]
            ).first
        else { return nil }
        let steps = try connection.query(
            "SELECT step_id FROM steps WHERE run_id = ? ORDER BY position", [.text(id)]
        ).compactMap { $0[0].string }
        return StoredRun(
            id: id, workflow: row[0].string ?? "", input: row[1].data ?? Data(),
            state: DurableRunState(rawValue: row[2].string ?? "") ?? .running, cancelRequested: row[3].int == 1,
            failure: row[5].string.map {
                RecordedFailure(kind: $0, step: row[6].string, message: row[4].string ?? "")
            }, finalStep: row[7].string ?? "", steps: steps,
            context: DurableRunOptions.context(recorded: row[8].string),
            created: Date(timeIntervalSince1970: row[9].double ?? 0))
    }

    func unfinishedRuns() async throws -> [StoredRun] {
        try await wrap {
            try await thread.perform(write: false) { connection in
                try connection.query(
                    "SELECT id FROM runs WHERE state IN ('pending', 'running') ORDER BY created"
                ).compactMap { row in try row[0].string.flatMap { try Self.loadRun($0, connection) } }
            }
        }
    }

    func finishRun(
        run: String, state: DurableRunState, error: RecordedFailure?,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        thread.submit(
            write: true,
            { connection -> Bool in
                try connection.query(
                    """
                    UPDATE runs SET state = ?, updated = ?, error = ?, error_kind = ?, error_step = ?
                    WHERE id = ? AND state IN ('pending', 'running')
                    """,
                    [
                        .text(state.rawValue), .real(self.now), error.map { .text($0.message) } ?? .null,
                        error.map { .text($0.kind) } ?? .null, error?.step.map { .text($0) } ?? .null, .text(run),
                    ])
                guard connection.changes == 1, state.isEnded else { return false }
                // A run failed by something other than a step (its flow changed, a value no longer decodes):
                // its steps not ended never run. A completed run has none left (`endRunIfDone`).
                if state != .completed {
                    try connection.query(
                        """
                        UPDATE steps SET state = 'cancelled', owner = NULL, ended = ?
                        WHERE run_id = ? AND state IN ('pending', 'running')
                        """, [.real(self.now), .text(run)])
                }
                try self.notify(.ended(run: run), connection)
                try self.wakeParent(of: run, connection)
                return true
            },
            completion: { [self] result in
                if case .success(true) = result { announce(.ended(run: run)) }
                completion(result.map { _ in () })
            })
    }

    func requestCancel(run: String) async throws -> Bool {
        let changed = try await wrap { try await thread.perform(write: true) { try self.cancel(run: run, $0) } }
        if changed { announceCancel(run) }
        return changed
    }

    func requestCancel(run: String, completion: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
        thread.submit(
            write: true, { [self] in try cancel(run: run, $0) },
            completion: { [self] result in
                if case .success(true) = result { announceCancel(run) }
                completion(result)
            })
    }

    private func announceCancel(_ run: String) {
        announce(.cancelled(run: run))
        announce(.ended(run: run))
    }

    func stepValue(run: String, step: String, completion: @escaping @Sendable (Result<Data?, any Error>) -> Void) {
        thread.submit(
            write: false,
            { connection -> Data? in
                try connection.query(
                    "SELECT value FROM steps WHERE run_id = ? AND step_id = ? AND state = 'completed'",
                    [.text(run), .text(step)]
                ).first?.first?.data
            }, completion: completion)
    }

    func cancel(run: String, _ connection: any SQLDatabase) throws -> Bool {
        try connection.query(
            """
            UPDATE runs SET cancel_requested = 1, state = 'cancelled', updated = ?, error = NULL
            WHERE id = ? AND state IN ('pending', 'running')
            """, [.real(self.now), .text(run)])
        let changed = connection.changes > 0
        if !changed, try connection.query("SELECT 1 FROM runs WHERE id = ?", [.text(run)]).isEmpty {
            throw DurableError.unknownRun(run)
        }
        try connection.query(
            """
            UPDATE steps SET state = 'cancelled', owner = NULL, ended = ?
            WHERE run_id = ? AND state IN ('pending', 'running')
            """, [.real(self.now), .text(run)])
        if changed {
            try notify(.cancelled(run: run), connection)
            try notify(.ended(run: run), connection)
            try wakeParent(of: run, connection)
            // Its child runs are cancelled with it.
            for child in try connection.query(
                "SELECT id FROM runs WHERE parent = ? AND state IN ('pending', 'running')", [.text(run)]
            ).compactMap({ $0[0].string }) {
                _ = try cancel(run: child, connection)
            }
        }
        return changed
    }

    func cancelRequested(among runs: [String], completion: @escaping @Sendable ([String]) -> Void) {
        guard !runs.isEmpty else { return completion([]) }
        thread.submit(
            write: false,
            { connection in
                // The ids as one list parameter: one statement text whatever their count.
                try connection.query(
                    "SELECT id FROM runs WHERE cancel_requested = 1 AND \(self.dialect.isIn("id"))",
                    [self.dialect.list(runs)]
                ).compactMap { $0[0].string }
            }, completion: { result in completion((try? result.get()) ?? []) })
    }

    func endedRuns(among runs: [String], completion: @escaping @Sendable (Result<[StoredRun], any Error>) -> Void) {
        guard !runs.isEmpty else { return completion(.success([])) }
        thread.submit(
            write: false,
            { connection -> [StoredRun] in
                // The ids as one list parameter: one statement text whatever their count.
                let found = try connection.query(
                    """
                    SELECT id FROM runs WHERE state IN ('completed', 'failed', 'cancelled') AND \(self.dialect.isIn("id"))
                    """, [self.dialect.list(runs)])
                return try found.compactMap { row in try row[0].string.flatMap { try Self.loadRun($0, connection) } }
            }, completion: completion)
    }

    func records(_ filter: DurableRunFilter) async throws -> [DurableRunRecord] {
        var conditions: [String] = []
        var bindings: [SQLValue] = []
        if let workflow = filter.workflow {
            conditions.append("workflow = ?")
            bindings.append(.text(workflow))
        }
        if let ids = filter.ids {
            conditions.append(dialect.isIn("id"))
            bindings.append(dialect.list(ids.sorted()))
        }
        if let states = filter.states {
            conditions.append(dialect.isIn("state"))
            bindings.append(dialect.list(states.map(\.rawValue).sorted()))
        }
        if let created = filter.created {
            conditions.append("created >= ? AND created < ?")
            bindings += [
                .real(created.lowerBound.timeIntervalSince1970), .real(created.upperBound.timeIntervalSince1970),
            ]
        }
        if let ended = filter.ended {
            conditions.append("state IN ('completed', 'failed', 'cancelled') AND updated >= ? AND updated < ?")
            bindings += [.real(ended.lowerBound.timeIntervalSince1970), .real(ended.upperBound.timeIntervalSince1970)]
        }
        for tag in (filter.tags ?? []).sorted() {
            conditions.append(dialect.holds("tags"))
            bindings.append(.text(",\(tag),"))
        }
        if let after = filter.after {
            conditions.append(
                """
                (created > (SELECT created FROM runs WHERE id = ?)
                    OR (created = (SELECT created FROM runs WHERE id = ?) AND id > ?))
                """)
            bindings += [.text(after), .text(after), .text(after)]
        }
        let condition = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let limit = filter.limit == nil ? "" : " LIMIT ?"
        if let count = filter.limit { bindings.append(.integer(Int64(max(0, count)))) }
        let query = """
            SELECT id, workflow, state, created, updated, error, input, final_step, tags, priority, deadline,
                not_before, parent, context
            FROM runs \(condition)
            ORDER BY created, id\(limit)
            """
        return try await wrap {
            try await thread.perform(write: false) { connection in
                try connection.query(query, bindings).map { row in
                    let id = row[0].string ?? ""
                    let state = DurableRunState(rawValue: row[2].string ?? "") ?? .running
                    var output: Data?
                    let steps = try connection.query(
                        """
                        SELECT step_id, state, attempt, error, error_type, started, ended, next_attempt_at, owner, value,
                            after
                        FROM steps WHERE run_id = ? ORDER BY position
                        """, [.text(id)]
                    )
                    let ids = steps.map { $0[0].string ?? "" }
                    let stepRecords = steps.map { step in
                        var record = DurableStepRecord(
                            id: step[0].string ?? "",
                            state: DurableRunState(rawValue: step[1].string ?? "") ?? .pending,
                            attempts: Int(step[2].int ?? 0),
                            lastError: step[3].string.map { message in
                                step[4].string.map { "\(message) (\($0))" } ?? message
                            },
                            started: step[5].double.map(Date.init(timeIntervalSince1970:)),
                            ended: step[6].double.map(Date.init(timeIntervalSince1970:)),
                            nextAttempt: step[7].double.map(Date.init(timeIntervalSince1970:)),
                            owner: step[8].string, value: step[9].data)
                        record.after = (step[10].string ?? "").split(separator: ",").compactMap { Int($0) }
                            .filter { $0 < ids.count }.map { ids[$0] }
                        if state == .completed, record.id == row[7].string { output = record.value }
                        return record
                    }
                    var record = DurableRunRecord(
                        id: id, workflow: row[1].string ?? "", state: state,
                        created: Date(timeIntervalSince1970: row[3].double ?? 0),
                        updated: Date(timeIntervalSince1970: row[4].double ?? 0), steps: stepRecords,
                        error: row[5].string,
                        input: row[6].data, output: output)
                    record.tags = DurableRunOptions.tags(recorded: row[8].string)
                    record.priority = Int(row[9].int ?? 0)
                    record.deadline = row[10].double.map(Date.init(timeIntervalSince1970:))
                    record.notBefore = row[11].double.map(Date.init(timeIntervalSince1970:))
                    record.parent = row[12].string
                    record.context = DurableRunOptions.context(recorded: row[13].string)
                    return record
                }
            }
        }
    }

    func prune(endedBefore date: Date) async throws -> Int {
        try await wrap {
            try await thread.perform(write: true) { connection -> Int in
                let before = SQLValue.real(date.timeIntervalSince1970)
                try connection.query(
                    """
                    DELETE FROM steps WHERE run_id IN (SELECT id FROM runs
                        WHERE state IN ('completed', 'failed', 'cancelled') AND updated < ?)
                    """, [before])
                try connection.query(
                    "DELETE FROM runs WHERE state IN ('completed', 'failed', 'cancelled') AND updated < ?", [before])
                return connection.changes
            }
        }
    }
}

extension SQLStorage {
    /// How many runs are in each state, of `workflow` and with every tag of `tags` when given.
    func counts(workflow: String?, tags: Set<String>?) async throws -> [DurableRunState: Int] {
        var conditions: [String] = []
        var bindings: [SQLValue] = []
        if let workflow {
            conditions.append("workflow = ?")
            bindings.append(.text(workflow))
        }
        for tag in (tags ?? []).sorted() {
            conditions.append(dialect.holds("tags"))
            bindings.append(.text(",\(tag),"))
        }
        let condition = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        return try await wrap {
            try await thread.perform(write: false) { connection in
                var counts: [DurableRunState: Int] = [:]
                for row in try connection.query(
                    "SELECT state, COUNT(*) FROM runs \(condition) GROUP BY state", bindings)
                {
                    if let state = row[0].string.flatMap(DurableRunState.init(rawValue:)) {
                        counts[state] = Int(row[1].int ?? 0)
                    }
                }
                return counts
            }
        }
    }
}
