import Foundation

/// The store's schema, written once for both databases: the tables and indexes as ordered migrations,
/// with each database's types filled in (`SQLDialect.types`). A store records the version it reached
/// (SQLite: `PRAGMA user_version`; PostgreSQL: `meta(version)`); opening it runs, in one transaction,
/// the migrations after that version, so a store made by an earlier version of this library is
/// upgraded in place. A store of a later version than ``version`` is refused, untouched.
///
/// ```text
/// runs(id PRIMARY KEY, workflow, input, state, cancel_requested, created, updated, error, error_kind,
///      error_step, final_step)
/// steps(run_id, step_id, position, state, attempt, failures, owner, lease_until, value, error, error_type,
///       next_attempt_at, started, ended, after, PRIMARY KEY (run_id, step_id))
/// owners(id PRIMARY KEY, host, pid, process_start, seen)       (SQLite: the processes of one host)
/// INDEX unfinished_runs ON runs(created) WHERE state IN ('pending', 'running')
/// INDEX ended_runs ON runs(updated) WHERE state IN ('completed', 'failed', 'cancelled')
/// INDEX live_steps ON steps(run_id) WHERE state IN ('pending', 'running')
/// INDEX running_steps ON steps(owner) WHERE state = 'running'      (the lease renewal's)
/// ```
package enum StoreSchema {
    /// The version the migrations reach.
    package static var version: Int { migrations.count }

    /// Each database's names for the column types, and the steps table's suffix.
    package struct Types: Sendable {
        let text: String
        let blob: String
        let real: String
        let integer: String
        /// After the steps table's definition (SQLite: `WITHOUT ROWID`, the table is its primary key).
        let stepsSuffix: String

        package static let sqlite = Types(
            text: "TEXT", blob: "BLOB", real: "REAL", integer: "INTEGER", stepsSuffix: " WITHOUT ROWID")
        package static let postgres = Types(
            text: "text", blob: "bytea", real: "double precision", integer: "integer", stepsSuffix: "")
    }

    /// The statements that take a store from version `from` to ``version``, in order (none when it is
    /// there already).
    package static func statements(from: Int, _ types: Types) -> [String] {
        migrations.dropFirst(max(0, from)).flatMap { $0(types) }
    }

    /// Migration n takes a store from version n - 1 to n. Append only: a released migration never changes.
    private static let migrations: [@Sendable (Types) -> [String]] = [
        // 1: the tables (as released first; SQLite's unfinished-runs index was on `state` then).
        { t in
            [
                """
                CREATE TABLE runs(id \(t.text) PRIMARY KEY, workflow \(t.text) NOT NULL, input \(t.blob) NOT NULL,
                    state \(t.text) NOT NULL, cancel_requested \(t.integer) NOT NULL DEFAULT 0,
                    created \(t.real) NOT NULL, updated \(t.real) NOT NULL, error \(t.text), error_kind \(t.text),
                    error_step \(t.text), final_step \(t.text) NOT NULL)
                """,
                """
                CREATE TABLE steps(run_id \(t.text) NOT NULL, step_id \(t.text) NOT NULL,
                    position \(t.integer) NOT NULL, state \(t.text) NOT NULL,
                    attempt \(t.integer) NOT NULL DEFAULT 0, failures \(t.integer) NOT NULL DEFAULT 0,
                    owner \(t.text), lease_until \(t.real), value \(t.blob), error \(t.text), error_type \(t.text),
                    next_attempt_at \(t.real), started \(t.real), ended \(t.real),
                    after \(t.text) NOT NULL DEFAULT '', PRIMARY KEY (run_id, step_id))\(t.stepsSuffix)
                """,
                """
                CREATE TABLE owners(id \(t.text) PRIMARY KEY, host \(t.text) NOT NULL, pid \(t.integer) NOT NULL,
                    process_start \(t.real), seen \(t.real) NOT NULL)
                """,
                "CREATE INDEX ended_runs ON runs(updated) WHERE state IN ('completed', 'failed', 'cancelled')",
            ]
        },
        // 2: the same indexes on both databases, the lease renewal's among them.
        { _ in
            [
                "DROP INDEX IF EXISTS unfinished_runs",
                "CREATE INDEX unfinished_runs ON runs(created) WHERE state IN ('pending', 'running')",
                "CREATE INDEX IF NOT EXISTS live_steps ON steps(run_id) WHERE state IN ('pending', 'running')",
                "CREATE INDEX running_steps ON steps(owner) WHERE state = 'running'",
            ]
        },
    ]
}
