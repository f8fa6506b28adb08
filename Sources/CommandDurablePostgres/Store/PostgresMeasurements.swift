import CommandCore
import CommandDurable
import Foundation

/// What the measurement tools of the package run on PostgreSQL (`Examples/DurableWorkersCost`): not API.
package enum PostgresMeasurements {
    /// The floor a worker's step is measured against: libpq alone, `connections` connections each on a
    /// thread of its own, working `steps` rows of a table as a job queue does, two transactions per
    /// round: claim `batch` rows (`SELECT ... FOR UPDATE SKIP LOCKED LIMIT batch`, mark them running),
    /// then mark them done with their values. `synchronous_commit` as `durability` says. Returns the
    /// seconds from the first claim to the last row done.
    package static func floor(
        url: String, steps: Int, connections: Int = 1, batch: Int = 1, durability: DurableDurability
    ) throws -> Double {
        try StoreThread.runAlone {
            let connection = try PostgresConnection(url)
            defer { connection.close() }
            try connection.execute(
                """
                DROP TABLE IF EXISTS floor_steps;
                CREATE TABLE floor_steps(id integer PRIMARY KEY, state text NOT NULL, value bytea);
                INSERT INTO floor_steps SELECT n, 'pending', NULL FROM generate_series(1, \(steps)) AS n;
                """)
        }
        let start = Date()
        let failures = Locked<[any Error]>([])
        let group = DispatchGroup()
        for _ in 0..<max(1, connections) {
            group.enter()
            let thread = Thread {
                Thread.current.threadDictionary[StoreThread.marker] = true
                defer { group.leave() }
                do { try work(url: url, batch: batch, durability: durability) } catch {
                    failures.withLock { $0.append(error) }
                }
            }
            thread.start()
        }
        group.wait()
        if let failure = failures.withLock({ $0.first }) { throw failure }
        return Date().timeIntervalSince(start)
    }

    /// One connection of the floor: rounds until no row is left pending.
    private static func work(url: String, batch: Int, durability: DurableDurability) throws {
        let connection = try PostgresConnection(url)
        defer { connection.close() }
        try connection.execute("SET synchronous_commit TO \(durability == .full ? "on" : "off")")
        while true {
            try connection.execute("BEGIN")
            let ids = try connection.query(
                "SELECT id FROM floor_steps WHERE state = 'pending' ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED",
                [.integer(Int64(batch))]
            ).compactMap { $0.first?.int }
            guard !ids.isEmpty else {
                try connection.execute("COMMIT")
                return
            }
            let list = SQLValue.text("{" + ids.map(String.init).joined(separator: ",") + "}")
            try connection.query("UPDATE floor_steps SET state = 'running' WHERE id = ANY(?::integer[])", [list])
            try connection.execute("COMMIT")
            try connection.execute("BEGIN")
            try connection.query(
                "UPDATE floor_steps SET state = 'done', value = convert_to(id::text, 'UTF8') WHERE id = ANY(?::integer[])",
                [list])
            try connection.execute("COMMIT")
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

    /// Waits until `sql`'s first column of its first row, as a number, reaches `target`, asking every
    /// `interval` on one connection of its own, on a thread of its own (a connection a question cost a
    /// backend's start and a SCRAM exchange each time: about a tenth of the machine when asked every
    /// 50 ms during a measurement).
    package static func wait(
        until sql: String, reaches target: Double, url: String, every interval: TimeInterval
    ) async throws {
        try await StoreThread.detached {
            let connection = try PostgresConnection(url)
            defer { connection.close() }
            while try (connection.query(sql, []).first?.first?.double ?? 0) < target {
                Thread.sleep(forTimeInterval: interval)
            }
        }
    }

    /// Runs `sql` on a connection of its own; returns the first column of its first row as a number.
    package static func number(_ sql: String, url: String) throws -> Double {
        try StoreThread.runAlone {
            let connection = try PostgresConnection(url)
            defer { connection.close() }
            return try connection.query(sql, []).first?.first?.double ?? 0
        }
    }
}
