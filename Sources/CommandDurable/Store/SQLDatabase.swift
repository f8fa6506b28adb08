import CommandCore
import Foundation

/// A value bound to, or read from, a statement.
package enum SQLValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    package var int: Int64? { if case .integer(let value) = self { return value } else { return nil } }
    package var double: Double? {
        switch self {
        case .real(let value): return value
        case .integer(let value): return Double(value)
        default: return nil
        }
    }
    package var string: String? { if case .text(let value) = self { return value } else { return nil } }
    package var data: Data? {
        switch self {
        case .blob(let value): return value
        case .text(let value): return Data(value.utf8)
        default: return nil
        }
    }
}

/// One connection to the database a store keeps its runs in, used by one thread at a time (the store's
/// own): not `Sendable`. The store's SQL is written once, with `?` placeholders, in the subset SQLite and
/// PostgreSQL share; a connection to another database rewrites the placeholders it needs.
package protocol SQLDatabase: AnyObject {
    /// Runs `sql` (one or more statements, no parameters, rows ignored).
    func execute(_ sql: String) throws
    /// Runs one statement with `bindings`; returns its rows (each row's columns in order).
    @discardableResult
    func query(_ sql: String, _ bindings: [SQLValue]) throws -> [[SQLValue]]
    /// Rows changed by the last statement.
    var changes: Int { get }
    /// The connection itself is gone (a server restarted, a network cut): the store's thread opens another
    /// and runs its requests again. An embedded database is never lost.
    var isLost: Bool { get }
    /// `error` is a conflict between transactions the database resolved by failing this one (a
    /// deadlock, a serialization failure): the store's thread rolls its batch back and runs it again.
    func isConflict(_ error: any Error) -> Bool
    func close()
}

extension SQLDatabase {
    /// An embedded database's writers never conflict (one at a time).
    package func isConflict(_ error: any Error) -> Bool { false }

    @discardableResult
    package func query(_ sql: String) throws -> [[SQLValue]] { try query(sql, []) }
}

/// What differs between the databases a store runs on; the SQL around it is the same.
package struct SQLDialect: Sendable {
    /// Begins a write transaction (`BEGIN IMMEDIATE` takes SQLite's write lock at once).
    package let begin: String
    /// Appended to the claim's read of a step row: PostgreSQL's `FOR UPDATE SKIP LOCKED` (the row is
    /// locked until the claim commits; one another claim holds is skipped, reported held); nothing for
    /// SQLite, whose write transaction already excludes every other writer.
    package let claimLock: String
    /// Whether an owner on this host whose process is gone loses its steps before its lease ends
    /// (SQLite's processes share a host; across hosts a pid means nothing: leases only).
    package let judgesOwnerProcesses: Bool
    /// A statement taking one payload that tells every process sharing the database, once the
    /// transaction commits (PostgreSQL's `pg_notify`); nil: other processes are not told (this process
    /// always is, after the commit).
    package let notify: String?
    /// What the store's errors name: a file's path, or a server's host, port and database.
    package let place: String

    package init(begin: String, claimLock: String, judgesOwnerProcesses: Bool, notify: String?, place: String) {
        self.begin = begin
        self.claimLock = claimLock
        self.judgesOwnerProcesses = judgesOwnerProcesses
        self.notify = notify
        self.place = place
    }
}

/// What changed in a store, told to its subscribers (workers, runs awaiting an end) so they read it at
/// once instead of at their next backstop poll.
package enum StoreChange: Equatable, Sendable {
    /// Steps may have become ready (a run recorded, a step ended).
    case ready
    /// The run ended (completed, failed or cancelled).
    case ended(run: String)
    /// The run's cancel was recorded.
    case cancelled(run: String)

    /// As sent between processes (a notification's payload).
    package var payload: String {
        switch self {
        case .ready: return "ready"
        case .ended(let run): return "ended:\(run)"
        case .cancelled(let run): return "cancelled:\(run)"
        }
    }

    /// A notification's payload, `"<origin store> <change>"`: the change, unless `origin` is `ignoring`.
    package init?(notification: String, ignoring origin: String) {
        guard let space = notification.firstIndex(of: " ") else { return nil }
        guard notification[..<space] != origin[...] else { return nil }
        self.init(payload: String(notification[notification.index(after: space)...]))
    }

    package init?(payload: String) {
        if payload == "ready" {
            self = .ready
        } else if payload.hasPrefix("ended:") {
            self = .ended(run: String(payload.dropFirst(6)))
        } else if payload.hasPrefix("cancelled:") {
            self = .cancelled(run: String(payload.dropFirst(10)))
        } else {
            return nil
        }
    }
}

/// The subscribers to a store's changes. `post` calls each on a global queue, never under the lock.
package final class ChangeFeed: Sendable {
    // Guards the subscribers, by token.
    private let subscribers = Locked<(next: Int, handlers: [Int: @Sendable (StoreChange) -> Void])>((0, [:]))

    package init() {}

    /// Calls `handler` with each change from now on, until the token is cancelled.
    func subscribe(_ handler: @escaping @Sendable (StoreChange) -> Void) -> any Cancelable {
        let token = subscribers.withLock { state -> Int in
            state.next += 1
            state.handlers[state.next] = handler
            return state.next
        }
        return BlockCancelable { [weak self] in
            _ = self?.subscribers.withLock { $0.handlers.removeValue(forKey: token) }
        }
    }

    package func post(_ change: StoreChange) {
        let handlers = subscribers.withLock { Array($0.handlers.values) }
        guard !handlers.isEmpty else { return }
        DispatchQueue.global().async {
            for handler in handlers { handler(change) }
        }
    }
}
