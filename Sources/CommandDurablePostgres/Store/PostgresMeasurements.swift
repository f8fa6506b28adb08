import CommandDurable
import Foundation

/// What the measurement tools of the package run on PostgreSQL (`Examples/DurableWorkersCost`): not API.
package enum PostgresMeasurements {
    /// The floor a worker's step is measured against: libpq alone, on a thread of its own, working
    /// `steps` rows of a table as a job queue does, two transactions per step: claim one (`SELECT ...
    /// FOR UPDATE SKIP LOCKED`, mark it running), then mark it done with its value. `synchronous_commit`
    /// as `durability` says. Returns seconds.
    package static func floor(url: String, steps: Int, durability: DurableDurability) throws -> Double {
        try StoreThread.runAlone {
            let connection = try PostgresConnection(url)
            defer { connection.close() }
            try connection.execute("SET synchronous_commit TO \(durability == .full ? "on" : "off")")
            try connection.execute(
                """
                DROP TABLE IF EXISTS floor_steps;
                CREATE TABLE floor_steps(id integer PRIMARY KEY, state text NOT NULL, value bytea);
                INSERT INTO floor_steps SELECT n, 'pending', NULL FROM generate_series(1, \(steps)) AS n;
                """)
            let start = Date()
            for _ in 0..<steps {
                try connection.execute("BEGIN")
                guard
                    let id = try connection.query(
                        "SELECT id FROM floor_steps WHERE state = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
                        []
                    ).first?.first?.int
                else { throw DurableError.storage(message: "the floor ran out of rows") }
                try connection.query("UPDATE floor_steps SET state = 'running' WHERE id = ?", [.integer(id)])
                try connection.execute("COMMIT")
                try connection.execute("BEGIN")
                try connection.query(
                    "UPDATE floor_steps SET state = 'done', value = ? WHERE id = ?",
                    [.blob(Data("\(id)".utf8)), .integer(id)])
                try connection.execute("COMMIT")
            }
            return Date().timeIntervalSince(start)
        }
    }

    /// Runs `sql` on a connection of its own (a measurement's reset: dropping the store's schema).
    package static func execute(_ sql: String, url: String) throws {
        try StoreThread.runAlone {
            let connection = try PostgresConnection(url)
            defer { connection.close() }
            try connection.execute(sql)
        }
    }
}
