import Foundation

/// The store's schema, written once for both databases: the tables and indexes as ordered migrations,
/// with each database's types filled in (`SQLDialect.types`). A store records the version it reached
/// (SQLite: `PRAGMA user_version`; PostgreSQL: `meta(version)`); opening it runs, in one transaction,
/// the migrations after that version, so a store made by an earlier version of this library is
/// upgraded in place. A store of a later version than ``version`` is refused, untouched.
///
/// ```text
/// runs(id PRIMARY KEY, workflow, input, state, cancel_requested, created, updated, error, error_kind,
///      error_step, final_step, not_before, deadline, priority, tags, parent, parent_step, context)
/// steps(run_id, step_id, position, state, attempt, failures, owner, lease_until, value, error, error_type,
///       next_attempt_at, started, ended, after, waiting, workflow, queued, claim, due, event, priority,
///       queue, queue_key, PRIMARY KEY (run_id, step_id))
/// owners(id PRIMARY KEY, host, pid, process_start, seen)       (SQLite: the processes of one host)
/// schedules(id PRIMARY KEY, workflow, input, cron, time_zone, every, catch_up, catch_up_max, next, last,
///      created)
/// queues(name PRIMARY KEY, concurrency, per_key, rate_count, rate_seconds)   (the limits recorded last)
/// queue_starts(queue, started)                                  (a rate's window: starts not yet out of it)
/// changes(seq growing, time, kind, change (JSON), owner)        (published while a process watches; pruned)
/// watchers(owner PRIMARY KEY, until)                            (the processes watching, each with a lease)
/// INDEX unfinished_runs ON runs(created) WHERE state IN ('pending', 'running')
/// INDEX ended_runs ON runs(updated) WHERE state IN ('completed', 'failed', 'cancelled')
/// INDEX live_steps ON steps(run_id) WHERE state IN ('pending', 'running')
/// INDEX running_steps ON steps(owner) WHERE state = 'running'      (the lease renewal's)
/// INDEX ready_steps ON steps(priority DESC, queued) WHERE state = 'pending' AND waiting = 0  (a claim)
/// INDEX deadline_runs ON runs(deadline) WHERE state IN ('pending', 'running') AND deadline IS NOT NULL
/// INDEX due_schedules ON schedules(next)
/// INDEX child_runs ON runs(parent) WHERE parent IS NOT NULL
/// INDEX queue_starts_by_time ON queue_starts(queue, started)
/// INDEX queued_running ON steps(queue, queue_key) WHERE state = 'running' AND queue IS NOT NULL
/// INDEX queued_ready ON steps(queue, priority DESC, queued) WHERE state = 'pending' AND waiting = 0 AND queue IS NOT NULL
/// INDEX changes_by_time ON changes(time)                          (the pruning's)
/// INDEX leased_steps ON steps(lease_until) WHERE state = 'running'  (the take-over of expired leases)
/// ```
///
/// A step's `after` lists the positions of the steps it comes after (`"0,3"`); `waiting` counts those
/// not completed yet (set when the run is recorded, decremented by each of their completions in its
/// transaction): a step is ready when it is `pending` with `waiting = 0` and no backoff left
/// (`next_attempt_at`). `workflow` and `queued` repeat the run's workflow and creation, so that a claim
/// reads the steps table alone.
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
        /// A key that only grows, never reused after a delete (the changes table's).
        let serialKey: String

        package static let sqlite = Types(
            text: "TEXT", blob: "BLOB", real: "REAL", integer: "INTEGER", stepsSuffix: " WITHOUT ROWID",
            serialKey: "INTEGER PRIMARY KEY AUTOINCREMENT")
        package static let postgres = Types(
            text: "text", blob: "bytea", real: "double precision", integer: "integer", stepsSuffix: "",
            serialKey: "bigserial PRIMARY KEY")
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
        // 3: what a worker claims in one statement: each step's count of unfinished predecessors
        // (`waiting`), its run's workflow and creation (`queued`, the order of claims), and the token of the
        // claim that took it (a claim run again after a lost connection finds its own).
        { t in
            [
                "ALTER TABLE steps ADD COLUMN waiting \(t.integer) NOT NULL DEFAULT 0",
                "ALTER TABLE steps ADD COLUMN workflow \(t.text) NOT NULL DEFAULT ''",
                "ALTER TABLE steps ADD COLUMN queued \(t.real) NOT NULL DEFAULT 0",
                "ALTER TABLE steps ADD COLUMN claim \(t.text)",
                """
                UPDATE steps SET workflow = (SELECT workflow FROM runs WHERE runs.id = steps.run_id),
                    queued = (SELECT created FROM runs WHERE runs.id = steps.run_id)
                """,
                """
                UPDATE steps SET waiting = (SELECT count(*) FROM steps p WHERE p.run_id = steps.run_id
                    AND p.state <> 'completed'
                    AND (',' || steps.after || ',') LIKE ('%,' || CAST(p.position AS \(t.text)) || ',%'))
                WHERE state = 'pending'
                """,
                "CREATE INDEX ready_steps ON steps(queued) WHERE state = 'pending' AND waiting = 0",
                "CREATE INDEX leased_steps ON steps(lease_until) WHERE state = 'running'",
            ]
        },
        // 4: time, events and limits. A step's `due` (when its sleep ends or its wait for an event times
        // out, recorded when it begins), `event` (the value sent to it: a mailbox, kept whether or not the
        // wait began) and `priority` (its run's: claims take higher first); a run's `not_before`,
        // `deadline`, `priority`, `tags` (`,a,b,`) and, for a child run, its `parent` run and the
        // `parent_step` that waits for it; the schedules, each with its next slot not fired; a step's
        // `queue` and `queue_key`, the queues' limits and the starts a rate counts.
        { t in
            [
                "ALTER TABLE steps ADD COLUMN due \(t.real)",
                "ALTER TABLE steps ADD COLUMN event \(t.blob)",
                "ALTER TABLE steps ADD COLUMN priority \(t.integer) NOT NULL DEFAULT 0",
                "ALTER TABLE runs ADD COLUMN not_before \(t.real)",
                "ALTER TABLE runs ADD COLUMN deadline \(t.real)",
                "ALTER TABLE runs ADD COLUMN priority \(t.integer) NOT NULL DEFAULT 0",
                "ALTER TABLE runs ADD COLUMN tags \(t.text) NOT NULL DEFAULT ''",
                "DROP INDEX IF EXISTS ready_steps",
                "CREATE INDEX ready_steps ON steps(priority DESC, queued) WHERE state = 'pending' AND waiting = 0",
                """
                CREATE INDEX deadline_runs ON runs(deadline)
                    WHERE state IN ('pending', 'running') AND deadline IS NOT NULL
                """,
                """
                CREATE TABLE schedules(id \(t.text) PRIMARY KEY, workflow \(t.text) NOT NULL, input \(t.blob) NOT NULL,
                    cron \(t.text), time_zone \(t.text), every \(t.real), catch_up \(t.text) NOT NULL,
                    catch_up_max \(t.integer) NOT NULL DEFAULT 0, next \(t.real), last \(t.real), created \(t.real) NOT NULL)
                """,
                "CREATE INDEX due_schedules ON schedules(next)",
                "ALTER TABLE runs ADD COLUMN parent \(t.text)",
                "ALTER TABLE runs ADD COLUMN parent_step \(t.text)",
                "CREATE INDEX child_runs ON runs(parent) WHERE parent IS NOT NULL",
                "ALTER TABLE steps ADD COLUMN queue \(t.text)",
                "ALTER TABLE steps ADD COLUMN queue_key \(t.text)",
                """
                CREATE TABLE queues(name \(t.text) PRIMARY KEY, concurrency \(t.integer), per_key \(t.integer),
                    rate_count \(t.integer), rate_seconds \(t.real))
                """,
                "CREATE TABLE queue_starts(queue \(t.text) NOT NULL, started \(t.real) NOT NULL)",
                "CREATE INDEX queue_starts_by_time ON queue_starts(queue, started)",
                "CREATE INDEX queued_running ON steps(queue, queue_key) WHERE state = 'running' AND queue IS NOT NULL",
                """
                CREATE INDEX queued_ready ON steps(queue, priority DESC, queued)
                    WHERE state = 'pending' AND waiting = 0 AND queue IS NOT NULL
                """,
            ]
        },
        // 5: the changes published while another process watches (SQLite's streams read them; a server's
        // are told by notifications), who watches, and the context a run carries (a trace's).
        { t in
            [
                """
                CREATE TABLE changes(seq \(t.serialKey), time \(t.real) NOT NULL, kind \(t.text) NOT NULL,
                    change \(t.text) NOT NULL, owner \(t.text) NOT NULL)
                """,
                "CREATE INDEX changes_by_time ON changes(time)",
                "CREATE TABLE watchers(owner \(t.text) PRIMARY KEY, until \(t.real) NOT NULL)",
                "ALTER TABLE runs ADD COLUMN context \(t.text)",
            ]
        },
    ]
}
