import CommandCore
import Dispatch
import Foundation

/// The store, on SQL: the same statements on SQLite (an embedded file)
/// and on PostgreSQL (`CommandDurablePostgres`), with what differs in an ``SQLDialect``. Every call runs on
/// the store's own thread (``StoreThread``).
///
/// The tables and indexes: ``StoreSchema`` (written once for both databases, with ordered migrations).
/// Times are seconds since 1970. States are `pending`, `running`, `completed`, `failed`, `cancelled`. A
/// step's `owner` is the store that claimed it last (kept once it ended: who did it, and what makes a
/// completion sent again after a lost connection recognisable as already recorded).
package final class SQLStorage: @unchecked Sendable {
    // `@unchecked Sendable`: the connection is touched only on `thread`; the rest is immutable.
    static var schemaVersion: Int { StoreSchema.version }

    package let owner: String
    let leaseSeconds: Double
    package let thread: StoreThread
    let dialect: SQLDialect
    /// Told what changed: by this process after its commits (`dialect.notify == nil`), or by the
    /// database's notifications, which the dialect's module listens to.
    package let feed = ChangeFeed()
    /// The store's observers (``DurableObserver``), told of this process's changes.
    let observers = DurableObservers()
    /// The streams' watch across processes (``DurableStore/changes(_:)``).
    let watch = ChangeWatch()

    /// Opens the store: the thread, then `open` on it (which prepares the schema and returns the
    /// connection). `owner` is this store's id in the records (host, pid, and a unique tail).
    package init(
        owner: String, dialect: SQLDialect, leaseSeconds: Double, patience: TimeInterval = 10,
        open: @escaping @Sendable () throws -> any SQLDatabase
    ) throws {
        self.owner = owner
        self.dialect = dialect
        self.leaseSeconds = leaseSeconds
        thread = try StoreThread(
            name: "AwesomeCommand durable store", place: dialect.place, begin: dialect.begin, patience: patience,
            open: open)
        // Leases of this process's running steps renewed every third of the lease (and its owner row
        // seen), by the same timer as every look of the store's: a renewal waits out an outage, and the
        // next is scheduled once it committed.
        renewals = Poller(backstop: Duration(clampingSeconds: max(0.01, leaseSeconds / 3)))
        // The changes of the next 5 ms published together: one transaction (or notification) for all of them.
        observers.setPublisher { [weak self] in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { [weak self] in
                self?.publishPending()
            }
        }
        let lease = leaseSeconds
        let judges = dialect.judgesOwnerProcesses
        let thread = thread
        renewals.start { done in
            thread.submit(
                write: true,
                { connection in
                    let now = thread.now
                    try connection.query(
                        "UPDATE steps SET lease_until = ? WHERE owner = ? AND state = 'running'",
                        [.real(now + lease), .text(owner)])
                    if judges {
                        try connection.query("UPDATE owners SET seen = ? WHERE id = ?", [.real(now), .text(owner)])
                    }
                }, completion: { _ in done() })
        }
    }

    /// A claim's token, unique among this store's claims (its tail: a count; its head: a random part
    /// made once, so that two stores given the same owner id do not share tokens either). Made
    /// without a system call: `UUID()` read `/dev/urandom` (an `open`, a `read`, a `close`) for each
    /// step's completion.
    func makeToken() -> String {
        let count = tokens.withLock { count -> UInt64 in
            count &+= 1
            return count
        }
        return "\(tokenHead)\(count)"
    }

    private let tokenHead = "\(UUID().uuidString.prefix(8).lowercased())-"
    // Guards the count of tokens made.
    private let tokens = Locked<UInt64>(0)

    /// An owner id: readable (which host and process did a step) and unique.
    package static func makeOwner() -> String {
        "\(ProcessIdentity.host)/\(ProcessIdentity.pid)/\(UUID().uuidString.prefix(8).lowercased())"
    }

    /// Renews the leases of this store's running steps.
    private let renewals: Poller

    // Guards what else stops with the store (a server store's listener).
    private let closers = Locked<[@Sendable () -> Void]>([])

    deinit { close() }

    package func close() {
        renewals.stop()
        thread.stop()
        let stops = closers.withLock { closers in
            defer { closers = [] }
            return closers
        }
        for stop in stops { stop() }
    }

    /// Calls `stop` when the store closes (its thread stopped).
    package func onClose(_ stop: @escaping @Sendable () -> Void) {
        closers.withLock { $0.append(stop) }
    }

    /// Runs `sql` on the store's thread (the measurement and test hooks).
    package func execute(_ sql: String) async throws {
        try await wrap { try await thread.perform(write: false) { try $0.execute(sql) } }
    }

    var commits: Int { thread.commits }

    var notifiesEveryProcess: Bool { dialect.notify != nil }

    /// Tells the other processes what changed, inside the transaction (sent once it commits), when the
    /// database can: the payload names this store, whose own listener skips it (``announce(_:)`` told this
    /// process already).
    func notify(_ change: StoreChange, _ connection: any SQLDatabase) throws {
        if let notify = dialect.notify { try connection.query(notify, [.text("\(owner) \(change.payload)")]) }
    }

    /// After a commit: tells this process's subscribers (at once, without a round trip to the database).
    func announce(_ change: StoreChange) {
        feed.post(change)
    }

    /// Tells the observers that run `run` ended (its state read, only when someone observes); `heard`:
    /// announced by another process (which tells the streams of the processes watching).
    func observeEnd(_ run: String, heard: Bool) {
        guard heard ? observers.hasObservers : !observers.isEmpty else { return }
        let owner = owner
        thread.submit(
            write: false,
            { connection in
                try connection.query("SELECT state, workflow FROM runs WHERE id = ?", [.text(run)]).first.map {
                    ($0[0].string, $0[1].string ?? "")
                }
            },
            completion: { [observers] result in
                guard case .success(let found?) = result, let state = found.0,
                    let ended = DurableRunState(rawValue: state), ended.isEnded
                else { return }
                observers.emit(.runEnded, workflow: found.1, run: run, owner: owner, state: ended, heard: heard)
            })
    }

    /// Now by the database's clock (on the store's thread: the requests' bodies).
    var now: Double { thread.now }

    /// Runs `body`, turning the database's errors into `DurableError.storage`.
    func wrap<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as DurableError { throw error } catch let error
            as CancellationError
        {
            throw error
        } catch {
            throw DurableError.storage(message: "\(dialect.place): \(error)")
        }
    }
}
