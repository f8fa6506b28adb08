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
    /// requests that arrive together share a transaction) and one that listens.
    ///
    /// **Behind a pooler** (PgBouncer in transaction mode, or any pooler that gives each transaction
    /// whichever server connection is free): give the pooler's URL as `postgres` and the server's own as
    /// `direct`. The requests then go through the pooler as unnamed statements (no prepared statement,
    /// no session setting outlives a transaction: the tables are named with their schema, and each
    /// write transaction sets its own `synchronous_commit`); the listening connection (`LISTEN` needs a
    /// session of its own) and the schema's creation or upgrade use `direct`. Without `direct`, `postgres`
    /// must be a session of its own: the server itself, or a pooler in session mode. A lost connection is
    /// opened again with a backoff (50 ms to 2 s) and its requests are run again: steps' records wait
    /// for it however long the outage lasts, nothing is dropped and no run fails for it; an awaiting call
    /// (`start`, `enqueue`, `runs`, ...) waits at most `patience` for it, then throws
    /// ``DurableError/storage(message:)`` naming the server; a cancelled task stops waiting at once.
    ///
    /// - Parameters:
    ///   - postgres: where the database is; a password in it is never printed.
    ///   - direct: the same database without the pooler, when `postgres` is a pooler in transaction mode
    ///     (nil: `postgres` is used for everything).
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
        postgres: String, direct: String? = nil, durability: DurableDurability = .full,
        lease: Duration = .seconds(30), patience: Duration = .seconds(10)
    ) async throws {
        try PostgresConnection.checkLocation(postgres)
        if let direct { try PostgresConnection.checkLocation(direct) }
        let storage = try await StoreThread.detached {
            try Self.openStorage(
                postgres: postgres, direct: direct, durability: durability, lease: lease, patience: patience)
        }
        self.init(sql: storage)
    }

    private static func openStorage(
        postgres: String, direct: String?, durability: DurableDurability, lease: Duration, patience: Duration
    ) throws -> SQLStorage {
        let place = PostgresConnection.place(of: postgres)
        let synchronous = durability == .full ? "on" : "off"
        let storage = try SQLStorage(
            owner: SQLStorage.makeOwner(),
            dialect: SQLDialect(
                // Behind a pooler, each transaction sets its own durability (no session setting lasts).
                begin: direct == nil ? "BEGIN" : "BEGIN; SET LOCAL synchronous_commit TO \(synchronous)",
                claimLock: " FOR UPDATE SKIP LOCKED", judgesOwnerProcesses: false,
                notify: "SELECT pg_notify('\(PostgresListener.channel)', ?)", place: place, lists: .postgresArrays),
            leaseSeconds: max(0.03, lease.inSeconds), patience: max(0.01, patience.inSeconds)
        ) {
            guard let direct else {
                let connection = try PostgresConnection(postgres)
                do {
                    try PostgresSchema.prepare(connection, durability: durability)
                } catch {
                    connection.close()
                    throw error
                }
                return connection
            }
            // The schema made or upgraded on the server itself; the requests through the pooler.
            let server = try PostgresConnection(direct)
            defer { server.close() }
            try PostgresSchema.prepare(server, durability: durability)
            return try PostgresConnection(postgres, pooled: true)
        }
        let listener: PostgresListener
        do {
            listener = try PostgresListener(conninfo: direct ?? postgres, feed: storage.feed, origin: storage.owner)
        } catch {
            storage.close()
            throw error
        }
        storage.onClose { listener.stop() }
        return storage
    }
}
