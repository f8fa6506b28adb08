import Foundation

/// What the measurement tools of the package read or build (`Examples/DurableCost`): not API.
package enum DurableMeasurements {
    /// Runs `sql` on the store's own connection (tests: `PRAGMA max_page_count` for a full disk).
    package static func execute(_ sql: String, on store: DurableStore) async throws {
        try await store.storage.execute(sql)
    }

    /// Runs the query `sql` on the store's own connection and returns its rows (tests: the schema).
    package static func query(_ sql: String, on store: DurableStore) async throws -> [[SQLValue]] {
        try await store.storage.thread.perform(write: false) { try $0.query(sql) }
    }

    /// How many enqueued runs the store watches for their end.
    package static func watchedRuns(of store: DurableStore) -> Int { store.awaited.count }

    /// The store's thread (the tests' hooks).
    package static func thread(of store: DurableStore) -> StoreThread? { store.storage.thread }

    /// Commits the store's thread made so far.
    package static func commits(of store: DurableStore) -> Int { store.storage.commits }

    /// The floor a durable chain is measured against: SQLite itself, on a thread of its own, writing
    /// each step as a durable step does in two transactions ("insert the step's row", then "update it
    /// with its value"), one after the other. Returns seconds.
    package static func floor(path: String, steps: Int, durability: DurableDurability) throws -> Double {
        try StoreThread.runAlone {
            let connection = try SQLiteConnection(path: path)
            defer { connection.close() }
            try connection.execute("PRAGMA journal_mode = WAL")
            try connection.execute(
                durability == .full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
            try connection.execute(
                """
                CREATE TABLE IF NOT EXISTS steps(run_id TEXT NOT NULL, step_id TEXT NOT NULL, state TEXT,
                    value BLOB, PRIMARY KEY (run_id, step_id)) WITHOUT ROWID
                """)
            let start = Date()
            for step in 0..<steps {
                try connection.execute("BEGIN IMMEDIATE")
                try connection.query(
                    "INSERT INTO steps(run_id, step_id, state) VALUES ('floor', ?, 'running')", [.text("s\(step)")])
                try connection.execute("COMMIT")
                try connection.execute("BEGIN IMMEDIATE")
                try connection.query(
                    "UPDATE steps SET state = 'completed', value = ? WHERE run_id = 'floor' AND step_id = ?",
                    [.blob(Data("\(step)".utf8)), .text("s\(step)")])
                try connection.execute("COMMIT")
            }
            return Date().timeIntervalSince(start)
        }
    }

    /// Records `count` ended runs (one completed step each) in the store at `path`, in one transaction,
    /// on a thread of its own.
    package static func seedEndedRuns(path: String, count: Int) throws {
        try DurableStore(path: path, durability: .normal).close()
        try StoreThread.runAlone {
            let connection = try SQLiteConnection(path: path)
            defer { connection.close() }
            try connection.execute("BEGIN IMMEDIATE")
            let now = Date().timeIntervalSince1970
            for index in 0..<count {
                try connection.query(
                    """
                    INSERT INTO runs(id, workflow, input, state, created, updated, final_step)
                    VALUES (?, 'seeded', x'7b7d', 'completed', ?, ?, 'only')
                    """, [.text("run-\(index)"), .real(now), .real(now)])
                try connection.query(
                    "INSERT INTO steps(run_id, step_id, position, state, attempt) VALUES (?, 'only', 0, 'completed', 1)",
                    [.text("run-\(index)")])
            }
            try connection.execute("COMMIT")
        }
    }
}
