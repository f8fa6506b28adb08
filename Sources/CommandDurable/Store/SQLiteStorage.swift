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
    let thread: StoreThread
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

    static var now: Double { Date().timeIntervalSince1970 }

    /// Runs `body`, turning SQLite's errors into `DurableError.storage`.
    func wrap<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as DurableError { throw error } catch {
            throw DurableError.storage(message: "'\(path)': \(error)")
        }
    }
}
