import CommandCore
import Foundation

/// The SQLite implementation of ``DurableStorage``: one file (WAL), `PRAGMA user_version` = schema
/// version, every call on the store's own thread (``StoreThread``).
///
/// ```text
/// runs(id TEXT PRIMARY KEY, workflow, input BLOB, state, cancel_requested, created REAL, updated REAL,
///      error, error_kind, error_step, final_step)
/// steps(run_id, step_id, position, state, attempt, failures, owner, lease_until REAL, value BLOB,
///       error, error_type, next_attempt_at REAL, started REAL, ended REAL, after (positions, comma-separated),
///       PRIMARY KEY (run_id, step_id))
/// owners(id TEXT PRIMARY KEY, host, pid, process_start REAL, seen REAL)
/// ```
/// Times are seconds since 1970. States are `pending`, `running`, `completed`, `failed`, `cancelled`.
final class SQLiteStorage: DurableStorage, @unchecked Sendable {
    // `@unchecked Sendable`: the connection is touched only on `thread`; the rest is immutable.
    static let schemaVersion = 1

    let owner: String
    let leaseSeconds: Double
    private let thread: StoreThread
    let path: String

    /// Opens (or creates) the store at `path`, checking it before writing anything: a file that is not a
    /// store, or one of a newer schema, is left untouched.
    init(path: String, durability: DurableDurability, leaseSeconds: Double) throws {
        self.path = path
        self.leaseSeconds = leaseSeconds
        let owner = UUID().uuidString
        self.owner = owner
        thread = try StoreThread(name: "AwesomeCommand durable store") {
            let connection: SQLiteConnection
            do {
                connection = try SQLiteConnection(path: path)
            } catch {
                throw DurableError.storage(message: "could not open '\(path)': \(error)")
            }
            connection.setBusyTimeout(milliseconds: 10_000)
            do {
                try Self.prepare(connection, path: path, durability: durability)
                try connection.query(
                    "INSERT INTO owners(id, host, pid, process_start, seen) VALUES (?, ?, ?, ?, ?)",
                    [
                        .text(owner), .text(ProcessIdentity.host), .integer(Int64(ProcessIdentity.pid)),
                        ProcessIdentity.startTime(of: ProcessIdentity.pid).map { .real($0) } ?? .null,
                        .real(Date().timeIntervalSince1970),
                    ])
            } catch {
                connection.close()
                throw error
            }
            return connection
        }
        let lease = leaseSeconds
        // Leases of this process's running steps renewed every third of the lease.
        thread.every(max(0.01, leaseSeconds / 3)) { connection in
            let now = Date().timeIntervalSince1970
            _ = try? connection.query(
                "UPDATE steps SET lease_until = ? WHERE owner = ? AND state = 'running'",
                [.real(now + lease), .text(owner)])
            _ = try? connection.query("UPDATE owners SET seen = ? WHERE id = ?", [.real(now), .text(owner)])
        }
    }

    deinit { thread.stop() }

    func close() { thread.stop() }

    /// Runs `sql` on the store's thread (the measurement and test hooks).
    func execute(_ sql: String) throws {
        try wrap { try thread.sync(write: false) { try $0.execute(sql) } }
    }

    var commits: Int { thread.commits }

    private static func prepare(_ connection: SQLiteConnection, path: String, durability: DurableDurability) throws {
        // Reads first: nothing is written to a file that turns out not to be ours.
        let version: Int
        let tables: Set<String>
        do {
            version = Int(try connection.query("PRAGMA user_version").first?.first?.int ?? 0)
            tables = Set(
                try connection.query("SELECT name FROM sqlite_master WHERE type = 'table'").compactMap {
                    $0.first?.string
                })
        } catch let error as SQLiteError where error.isNotADatabase {
            throw DurableError.notAStore(path: path)
        } catch {
            throw DurableError.storage(message: "could not read '\(path)': \(error)")
        }
        if version > schemaVersion { throw DurableError.newerSchema(found: version, supported: schemaVersion) }
        let ours: Set<String> = ["runs", "steps", "owners"]
        if version == 0 && !tables.isEmpty { throw DurableError.notAStore(path: path) }
        if version > 0 && !ours.isSubset(of: tables) { throw DurableError.notAStore(path: path) }
        do {
            if path != ":memory:" { try connection.execute("PRAGMA journal_mode = WAL") }
            try connection.execute(durability == .full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
            if version == 0 {
                try connection.execute(
                    """
                    BEGIN IMMEDIATE;
                    CREATE TABLE runs(id TEXT PRIMARY KEY, workflow TEXT NOT NULL, input BLOB NOT NULL,
                        state TEXT NOT NULL, cancel_requested INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL,
                        updated REAL NOT NULL, error TEXT, error_kind TEXT, error_step TEXT, final_step TEXT NOT NULL);
                    CREATE TABLE steps(run_id TEXT NOT NULL, step_id TEXT NOT NULL, position INTEGER NOT NULL,
                        state TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0,
                        owner TEXT, lease_until REAL, value BLOB, error TEXT, error_type TEXT, next_attempt_at REAL,
                        started REAL, ended REAL, after TEXT NOT NULL DEFAULT '',
                        PRIMARY KEY (run_id, step_id)) WITHOUT ROWID;
                    CREATE TABLE owners(id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL,
                        process_start REAL, seen REAL NOT NULL);
                    CREATE INDEX unfinished_runs ON runs(state) WHERE state IN ('pending', 'running');
                    CREATE INDEX ended_runs ON runs(updated) WHERE state IN ('completed', 'failed', 'cancelled');
                    PRAGMA user_version = \(schemaVersion);
                    COMMIT;
                    """)
            }
        } catch let error as SQLiteError where error.isNotADatabase {
            throw DurableError.notAStore(path: path)
        } catch {
            try? connection.execute("ROLLBACK")
            throw DurableError.storage(message: "could not prepare '\(path)': \(error)")
        }
    }

    private static var now: Double { Date().timeIntervalSince1970 }

    // MARK: Runs

    func createRun(_ run: NewRun) throws -> CreateRunResult {
        try wrap {
            try thread.sync(write: true) { connection -> CreateRunResult in
                if let existing = try Self.loadRun(run.id, connection) { return .exists(existing) }
                let now = Self.now
                try connection.query(
                    """
                    INSERT INTO runs(id, workflow, input, state, created, updated, final_step)
                    VALUES (?, ?, ?, 'running', ?, ?, ?)
                    """,
                    [
                        .text(run.id), .text(run.workflow), .blob(run.input), .real(now), .real(now),
                        .text(run.finalStep),
                    ])
                for (position, step) in run.steps.enumerated() {
                    let after = run.after[position].map(String.init).joined(separator: ",")
                    try connection.query(
                        "INSERT INTO steps(run_id, step_id, position, state, after) VALUES (?, ?, ?, 'pending', ?)",
                        [.text(run.id), .text(step), .integer(Int64(position)), .text(after)])
                }
                return .created
            }
        }
    }

    func loadRun(_ id: String) throws -> StoredRun? {
        try wrap { try thread.sync(write: false) { try Self.loadRun(id, $0) } }
    }

    private static func loadRun(_ id: String, _ connection: SQLiteConnection) throws -> StoredRun? {
        guard
            let row = try connection.query(
                """
                SELECT workflow, input, state, cancel_requested, error, error_kind, error_step, final_step
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
            }, finalStep: row[7].string ?? "", steps: steps)
    }

    func unfinishedRuns() throws -> [StoredRun] {
        try wrap {
            try thread.sync(write: false) { connection in
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
            { connection in
                try connection.query(
                    """
                    UPDATE runs SET state = ?, updated = ?, error = ?, error_kind = ?, error_step = ?
                    WHERE id = ? AND state IN ('pending', 'running')
                    """,
                    [
                        .text(state.rawValue), .real(Self.now), error.map { .text($0.message) } ?? .null,
                        error.map { .text($0.kind) } ?? .null, error?.step.map { .text($0) } ?? .null, .text(run),
                    ])
                if state.isEnded {
                    try connection.query(
                        """
                        UPDATE steps SET state = 'cancelled', owner = NULL, ended = ?
                        WHERE run_id = ? AND state IN ('pending', 'running')
                        """, [.real(Self.now), .text(run)])
                }
            }, completion: completion)
    }

    func requestCancel(run: String) throws -> Bool {
        try wrap { try thread.sync(write: true) { try Self.cancel(run: run, $0) } }
    }

    func requestCancel(run: String, completion: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
        thread.submit(write: true, { try Self.cancel(run: run, $0) }, completion: completion)
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

    private static func cancel(run: String, _ connection: SQLiteConnection) throws -> Bool {
        try connection.query(
            """
            UPDATE runs SET cancel_requested = 1, state = 'cancelled', updated = ?, error = NULL
            WHERE id = ? AND state IN ('pending', 'running')
            """, [.real(now), .text(run)])
        let changed = connection.changes > 0
        try connection.query(
            """
            UPDATE steps SET state = 'cancelled', owner = NULL, ended = ?
            WHERE run_id = ? AND state IN ('pending', 'running')
            """, [.real(now), .text(run)])
        return changed
    }

    func cancelRequested(among runs: [String], completion: @escaping @Sendable ([String]) -> Void) {
        guard !runs.isEmpty else { return completion([]) }
        thread.submit(
            write: false,
            { connection in
                try runs.filter { id in
                    try connection.query("SELECT cancel_requested FROM runs WHERE id = ?", [.text(id)]).first?.first?
                        .int
                        == 1
                }
            }, completion: { result in completion((try? result.get()) ?? []) })
    }

    func records(_ filter: DurableRunFilter) throws -> [DurableRunRecord] {
        try wrap {
            try thread.sync(write: false) { connection in
                let (condition, bindings): (String, [SQLiteValue]) =
                    switch filter {
                    case .all: ("", [])
                    case .unfinished: ("WHERE state IN ('pending', 'running')", [])
                    case .state(let state): ("WHERE state = ?", [.text(state.rawValue)])
                    case .workflow(let name): ("WHERE workflow = ?", [.text(name)])
                    }
                return try connection.query(
                    "SELECT id, workflow, state, created, updated, error FROM runs \(condition) ORDER BY created, id",
                    bindings
                ).map { row in
                    let id = row[0].string ?? ""
                    let steps = try connection.query(
                        """
                        SELECT step_id, state, attempt, error, error_type, started, ended, next_attempt_at FROM steps
                        WHERE run_id = ? ORDER BY position
                        """, [.text(id)]
                    ).map { step in
                        DurableStepRecord(
                            id: step[0].string ?? "",
                            state: DurableRunState(rawValue: step[1].string ?? "") ?? .pending,
                            attempts: Int(step[2].int ?? 0),
                            lastError: step[3].string.map { message in
                                step[4].string.map { "\(message) (\($0))" } ?? message
                            },
                            started: step[5].double.map(Date.init(timeIntervalSince1970:)),
                            ended: step[6].double.map(Date.init(timeIntervalSince1970:)),
                            nextAttempt: step[7].double.map(Date.init(timeIntervalSince1970:)))
                    }
                    return DurableRunRecord(
                        id: id, workflow: row[1].string ?? "",
                        state: DurableRunState(rawValue: row[2].string ?? "") ?? .running,
                        created: Date(timeIntervalSince1970: row[3].double ?? 0),
                        updated: Date(timeIntervalSince1970: row[4].double ?? 0), steps: steps, error: row[5].string)
                }
            }
        }
    }

    func prune(endedBefore date: Date) throws -> Int {
        try wrap {
            try thread.sync(write: true) { connection -> Int in
                let before = SQLiteValue.real(date.timeIntervalSince1970)
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

    // MARK: Workers

    func readySteps(
        workflows: [String], excluding busy: Set<String>, limit: Int,
        completion: @escaping @Sendable (Result<[ReadyStep], any Error>) -> Void
    ) {
        guard !workflows.isEmpty, limit > 0 else { return completion(.success([])) }
        thread.submit(
            write: false,
            { connection -> [ReadyStep] in
                let now = Self.now
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
                        if dead[holder] == nil { dead[holder] = Self.isDead(owner: holder, connection) }
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

    // MARK: Steps

    func claim(
        run: String, step: String, position: Int,
        completion: @escaping @Sendable (Result<ClaimResult, any Error>) -> Void
    ) {
        let owner = owner
        let lease = leaseSeconds
        thread.submit(
            write: true, hop: false,
            { connection -> ClaimResult in
                let now = Self.now
                guard
                    let runRow = try connection.query(
                        "SELECT state, cancel_requested FROM runs WHERE id = ?", [.text(run)]
                    ).first
                else { throw DurableError.storage(message: "run '\(run)' is not in the store") }
                if runRow[1].int == 1 || runRow[0].string == DurableRunState.cancelled.rawValue { return .runCancelled }
                var row = try connection.query(
                    """
                    SELECT state, attempt, failures, owner, lease_until, value, error, next_attempt_at
                    FROM steps WHERE run_id = ? AND step_id = ?
                    """, [.text(run), .text(step)]
                ).first
                if row == nil {
                    // A step the workflow makes now and did not when the run was recorded.
                    try connection.query(
                        "INSERT INTO steps(run_id, step_id, position, state) VALUES (?, ?, ?, 'pending')",
                        [.text(run), .text(step), .integer(Int64(position))])
                    row = [.text("pending"), .integer(0), .integer(0), .null, .null, .null, .null, .null]
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
                    return .runCancelled
                case "running":
                    let holder = fields[3].string ?? ""
                    let until = fields[4].double ?? 0
                    if until >= now && !Self.isDead(owner: holder, connection) {
                        return .held(until: Date(timeIntervalSince1970: until))
                    }
                    tookOver = true
                default:
                    if let next = fields[7].double, next > now { return .notBefore(Date(timeIntervalSince1970: next)) }
                }
                try connection.query(
                    """
                    UPDATE steps SET state = 'running', owner = ?, lease_until = ?, attempt = attempt + 1,
                        started = ?, next_attempt_at = NULL WHERE run_id = ? AND step_id = ?
                    """, [.text(owner), .real(now + lease), .real(now), .text(run), .text(step)])
                return .claimed(attempt: attempt + 1, failures: failures, tookOver: tookOver)
            }, completion: completion)
    }

    /// An owner on this host whose process is gone (or whose pid now belongs to a later process).
    /// Another host's owner is judged by its leases only.
    private static func isDead(owner: String, _ connection: SQLiteConnection) -> Bool {
        guard
            let row = try? connection.query("SELECT host, pid, process_start FROM owners WHERE id = ?", [.text(owner)])
                .first
        else { return true }
        guard row[0].string == ProcessIdentity.host, let pid = row[1].int else { return false }
        return !ProcessIdentity.isAlive(pid: Int32(pid), startTime: row[2].double)
    }

    func complete(
        run: String, step: String, attempt: Int, value: Data?, claiming next: [(step: String, position: Int)],
        completion: @escaping @Sendable (Result<CompleteResult, any Error>) -> Void
    ) {
        let owner = owner
        let lease = leaseSeconds
        thread.submit(
            write: true, hop: false,
            { connection -> CompleteResult in
                let now = Self.now
                try connection.query(
                    """
                    UPDATE steps SET state = 'completed', value = ?, ended = ?, owner = NULL, lease_until = NULL
                    WHERE run_id = ? AND step_id = ? AND attempt = ? AND owner = ? AND state = 'running'
                    """,
                    [
                        value.map { .blob($0) } ?? .null, .real(now), .text(run), .text(step),
                        .integer(Int64(attempt)), .text(owner),
                    ])
                guard connection.changes == 1 else { return CompleteResult(recorded: false, claimed: [:]) }
                // The steps made ready by this one, claimed in the same transaction (a chain's next step
                // needs no claim of its own): only pending ones with no backoff left, of a run not cancelled.
                var claimed: [String: (attempt: Int, failures: Int)] = [:]
                for candidate in next {
                    try connection.query(
                        """
                        UPDATE steps SET state = 'running', owner = ?, lease_until = ?, attempt = attempt + 1,
                            started = ?, next_attempt_at = NULL
                        WHERE run_id = ? AND step_id = ? AND state = 'pending'
                            AND (next_attempt_at IS NULL OR next_attempt_at <= ?)
                            AND NOT EXISTS (SELECT 1 FROM runs WHERE id = ? AND cancel_requested = 1)
                        """,
                        [
                            .text(owner), .real(now + lease), .real(now), .text(run), .text(candidate.step), .real(now),
                            .text(run),
                        ])
                    guard connection.changes == 1,
                        let row = try connection.query(
                            "SELECT attempt, failures FROM steps WHERE run_id = ? AND step_id = ?",
                            [.text(run), .text(candidate.step)]
                        ).first
                    else { continue }
                    claimed[candidate.step] = (Int(row[0].int ?? 1), Int(row[1].int ?? 0))
                }
                return CompleteResult(recorded: true, claimed: claimed)
            }, completion: completion)
    }

    func fail(
        run: String, step: String, attempt: Int, error: String, errorType: String, retryAt: Date?,
        completion: @escaping @Sendable (Result<Bool, any Error>) -> Void
    ) {
        let owner = owner
        thread.submit(
            write: true, hop: false,
            { connection -> Bool in
                try connection.query(
                    """
                    UPDATE steps SET state = ?, failures = failures + 1, error = ?, error_type = ?,
                        next_attempt_at = ?, ended = ?, owner = NULL, lease_until = NULL
                    WHERE run_id = ? AND step_id = ? AND attempt = ? AND owner = ? AND state = 'running'
                    """,
                    [
                        .text(retryAt == nil ? "failed" : "pending"), .text(error), .text(errorType),
                        retryAt.map { .real($0.timeIntervalSince1970) } ?? .null,
                        .real(Self.now), .text(run), .text(step), .integer(Int64(attempt)),
                        .text(owner),
                    ])
                return connection.changes == 1
            }, completion: completion)
    }

    /// Runs `body`, turning SQLite's errors into `DurableError.storage`.
    private func wrap<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as DurableError { throw error } catch {
            throw DurableError.storage(message: "'\(path)': \(error)")
        }
    }
}
