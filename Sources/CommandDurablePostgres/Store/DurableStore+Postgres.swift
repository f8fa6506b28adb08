import CommandDurable
import Foundation

extension DurableStore {
    /// Opens the durable store kept in the PostgreSQL database at `postgres` (a URL such as
    /// `postgresql://app@db.internal:5432/app`, or a libpq connection string), creating its schema
    /// (`awesomecommand`: tables `runs`, `steps`, `meta`) if missing.
    ///
    /// The same store, with the same rules, as on SQLite: processes on many hosts share it, each
    /// claiming steps (`SELECT ... FOR UPDATE SKIP LOCKED`, a lease per claim renewed every third of it)
    /// and telling the others when runs are recorded and steps end (`LISTEN`/`NOTIFY` on the channel
    /// `awesomecommand`). An owner is judged by its lease only: another host's process id means nothing.
    ///
    /// **Connections:** two per store: one for its requests (every call on the store's own thread,
    /// requests that arrive together share a transaction) and one that listens. A lost connection is
    /// opened again with a backoff (50 ms to 2 s) and its requests are run again: steps' records wait
    /// for it however long the outage lasts, nothing is dropped and no run fails for it; an awaiting call
    /// (`start`, `enqueue`, `runs`, ...) waits at most `patience` for it, then throws
    /// ``DurableError/storage(message:)`` naming the server; a cancelled task stops waiting at once.
    ///
    /// - Parameters:
    ///   - postgres: where the database is; a password in it is never printed.
    ///   - durability: ``DurableDurability/full`` (each commit waits for the server's disk:
    ///     `synchronous_commit = on`) or ``DurableDurability/normal`` (`synchronous_commit = off`: a crash
    ///     of the server may lose the last fraction of a second of commits, never half of one).
    ///   - lease: how long a claimed step stays this store's without a renewal; another process takes the
    ///     step over after it.
    ///   - patience: how long an awaiting call (`start`, `enqueue`, `runs`, ...) waits for a lost
    ///     connection before it throws ``DurableError/storage(message:)``; the engine's own records
    ///     (claims, completions, a run's end) wait for it however long it takes.
    /// - Throws: ``DurableError/storage(message:)`` naming the server when it cannot be reached or
    ///   refuses the credentials; ``DurableError/newerSchema(found:supported:)`` for a schema a newer
    ///   version made; ``DurableError/notAStore(path:)`` when the schema `awesomecommand` holds something
    ///   else. Nothing is changed in the last two cases. A string that is neither a `postgresql://` (or
    ///   `postgres://`) URL nor `key=value` pairs (`postgres+asyncpg://...`, `mysql://...`, a bare name)
    ///   is refused before libpq sees it, with ``DurableError/storage(message:)`` quoting it without its
    ///   password.
    ///
    /// Suspends while the connections open (on a thread of the store's own: no thread of the caller or
    /// of the concurrency pool waits).
    public convenience init(
        postgres: String, durability: DurableDurability = .full, lease: Duration = .seconds(30),
        patience: Duration = .seconds(10)
    ) async throws {
        try PostgresConnection.checkLocation(postgres)
        let storage = try await StoreThread.detached {
            try Self.openStorage(postgres: postgres, durability: durability, lease: lease, patience: patience)
        }
        self.init(sql: storage)
    }

    private static func openStorage(
        postgres: String, durability: DurableDurability, lease: Duration, patience: Duration
    ) throws -> SQLStorage {
        let place = PostgresConnection.place(of: postgres)
        let storage = try SQLStorage(
            owner: SQLStorage.makeOwner(),
            dialect: SQLDialect(
                begin: "BEGIN", claimLock: " FOR UPDATE SKIP LOCKED", judgesOwnerProcesses: false,
                notify: "SELECT pg_notify('\(PostgresListener.channel)', ?)", place: place, lists: .postgresArrays),
            leaseSeconds: max(0.03, lease.inSeconds), patience: max(0.01, patience.inSeconds)
        ) {
            let connection = try PostgresConnection(postgres)
            do {
                try PostgresSchema.prepare(connection, durability: durability)
            } catch {
                connection.close()
                throw error
            }
            return connection
        }
        let listener: PostgresListener
        do {
            listener = try PostgresListener(conninfo: postgres, feed: storage.feed, origin: storage.owner)
        } catch {
            storage.close()
            throw error
        }
        storage.onClose { listener.stop() }
        return storage
    }
}
