import CommandCore
import Foundation

// Queues: their limits (concurrency, per key, rate) enforced in the claim's transaction, with the queue's
// row locked on a server so that claims of one queue from several processes take their places in turn.
extension SQLStorage {
    /// The limits recorded for `queue` and its use now: the places left (nil: no limit), the keys at their
    /// limit, and when a rate's window frees a place (nil: not rate-limited). Locks the queue's row.
    ///
    /// `now` is read once the row is locked, and is the time of every start the caller records: a time
    /// read before the lock's wait would let a start recorded meanwhile by another process fall out of
    /// the window early (measured: 8 starts in a second for a rate of 5).
    private func places(
        _ queue: String, _ connection: any SQLDatabase
    ) throws -> (left: Int?, perKey: Int?, running: [String: Int], rateFrees: Double?, now: Double) {
        guard
            let limits = try connection.query(
                "SELECT concurrency, per_key, rate_count, rate_seconds FROM queues WHERE name = ?\(dialect.rowLock)",
                [.text(queue)]
            ).first
        else { return (nil, nil, [:], nil, self.now) }
        let now = self.now
        var running: [String: Int] = [:]
        var total = 0
        for row in try connection.query(
            "SELECT queue_key, count(*) FROM steps WHERE queue = ? AND state = 'running' GROUP BY queue_key",
            [.text(queue)])
        {
            let count = Int(row[1].int ?? 0)
            total += count
            if let key = row[0].string { running[key, default: 0] += count }
        }
        var left = limits[0].int.map { Int($0) - total }
        var rateFrees: Double?
        if let count = limits[2].int, let seconds = limits[3].double {
            try connection.query(
                "DELETE FROM queue_starts WHERE queue = ? AND started <= ?", [.text(queue), .real(now - seconds)])
            let recent = try connection.query(
                "SELECT started FROM queue_starts WHERE queue = ? ORDER BY started", [.text(queue)]
            ).compactMap { $0[0].double }
            let allowed = Int(count) - recent.count
            left = min(left ?? allowed, allowed)
            if allowed <= 0 { rateFrees = (recent.first ?? now) + seconds }
        }
        return (left, limits[1].int.map { Int($0) }, running, rateFrees, now)
    }

    /// Claims up to `limit` ready steps of the queues of `workflows`, each queue's limits held: one queue
    /// at a time, its row locked, its places counted, its candidates taken in priority and age order,
    /// skipping keys at their limit. Returns the claimed rows (`claimedColumns`).
    func claimQueued(
        workflows names: SQLValue, limit: Int, owner: String, token: String, _ connection: any SQLDatabase
    ) throws -> [[SQLValue]] {
        let now = self.now
        let queues = try connection.query(
            """
            SELECT DISTINCT queue FROM steps
            WHERE state = 'pending' AND waiting = 0 AND queue IS NOT NULL AND \(dialect.isIn("workflow"))
                AND (next_attempt_at IS NULL OR next_attempt_at <= ?)
            """, [names, .real(now)]
        ).compactMap { $0[0].string }
        var taken: [[SQLValue]] = []
        for queue in queues where taken.count < limit {
            let (left, perKey, running, _, now) = try places(queue, connection)
            let room = min(limit - taken.count, left ?? Int.max)
            guard room > 0 else { continue }
            let candidates = try connection.query(
                """
                SELECT run_id, step_id, queue_key FROM steps
                WHERE queue = ? AND state = 'pending' AND waiting = 0 AND \(dialect.isIn("workflow"))
                    AND (next_attempt_at IS NULL OR next_attempt_at <= ?)
                ORDER BY priority DESC, queued LIMIT ?\(dialect.claimLock)
                """, [.text(queue), names, .real(now), .integer(Int64(min(room * 4 + 16, 1_000)))])
            var keys = running
            var picked = 0
            for candidate in candidates where picked < room {
                if let perKey, let key = candidate[2].string {
                    guard keys[key, default: 0] < perKey else { continue }
                    keys[key, default: 0] += 1
                }
                taken += try connection.query(
                    "UPDATE steps SET \(Self.claimSet) WHERE run_id = ? AND step_id = ? RETURNING \(Self.claimedColumns)",
                    [.text(owner), .real(now + leaseSeconds), .real(now), .text(token), candidate[0], candidate[1]])
                try connection.query(
                    "INSERT INTO queue_starts(queue, started) VALUES (?, ?)", [.text(queue), .real(now)])
                picked += 1
            }
        }
        return taken
    }

    /// Whether a step of `queue` with `key` may start now (its place taken: a start counted); otherwise
    /// when to ask again.
    func admits(queue: String, key: String?, _ connection: any SQLDatabase) throws -> Date? {
        let (left, perKey, running, rateFrees, now) = try places(queue, connection)
        let keyFull = perKey.map { limit in key.map { running[$0, default: 0] >= limit } ?? false } ?? false
        if (left ?? 1) <= 0 || keyFull {
            let wait = rateFrees.map { max($0 - now, 0.01) } ?? 0.05
            return Date(timeIntervalSinceNow: min(wait, 1))
        }
        try connection.query("INSERT INTO queue_starts(queue, started) VALUES (?, ?)", [.text(queue), .real(now)])
        return nil
    }
}
