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
    /// The database server's clock, in seconds since 1970, when it has one of its own (a server's); nil
    /// for an embedded database, whose clock is this host's.
    func serverClock() throws -> Double?
    func close()
}

extension SQLDatabase {
    /// An embedded database's writers never conflict (one at a time).
    package func isConflict(_ error: any Error) -> Bool { false }

    /// An embedded database's clock is this host's.
    package func serverClock() throws -> Double? { nil }

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
    /// How a list of values is one parameter (so a statement's text never depends on a list's length).
    package let lists: Lists

    /// A list as one parameter: a PostgreSQL array (`column = ANY(?::text[])`), or a JSON array read with
    /// SQLite's `json_each`.
    package enum Lists: Sendable {
        case postgresArrays
        case sqliteJSON
    }

    package init(
        begin: String, claimLock: String, judgesOwnerProcesses: Bool, notify: String?, place: String,
        lists: Lists
    ) {
        self.begin = begin
        self.claimLock = claimLock
        self.judgesOwnerProcesses = judgesOwnerProcesses
        self.notify = notify
        self.place = place
        self.lists = lists
    }

    /// Appended to a read of one row that the transaction then writes: PostgreSQL's `FOR UPDATE` (a
    /// concurrent writer of the row waits for this transaction); nothing for SQLite (one writer at a time).
    var rowLock: String { claimLock.isEmpty ? "" : " FOR UPDATE" }

    /// `column` (a text of `,`-separated items, `,a,b,`) holds the item bound to its `?` as `,item,`.
    func holds(_ column: String) -> String {
        switch lists {
        case .postgresArrays: return "strpos(\(column), ?) > 0"
        case .sqliteJSON: return "instr(\(column), ?) > 0"
        }
    }

    /// `column` is one of the texts of the list bound to its `?` (``list(_:)``).
    func isIn(_ column: String) -> String {
        switch lists {
        case .postgresArrays: return "\(column) = ANY(CAST(? AS text[]))"
        case .sqliteJSON: return "\(column) IN (SELECT value FROM json_each(?))"
        }
    }

    /// `column` is one of the integers of the list bound to its `?` (``list(_:)``).
    func isInIntegers(_ column: String) -> String {
        switch lists {
        case .postgresArrays: return "\(column) = ANY(CAST(? AS integer[]))"
        case .sqliteJSON: return "\(column) IN (SELECT value FROM json_each(?))"
        }
    }

    /// The one parameter a list of texts is bound as.
    func list(_ values: some Sequence<String>) -> SQLValue {
        switch lists {
        case .postgresArrays:
            // An array literal, each element quoted: `{"a","b \"c\""}`.
            let quoted = values.map { value in
                "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                    + "\""
            }
            return .text("{" + quoted.joined(separator: ",") + "}")
        case .sqliteJSON:
            let data = (try? JSONSerialization.data(withJSONObject: Array(values), options: [])) ?? Data("[]".utf8)
            return .text(String(decoding: data, as: UTF8.self))
        }
    }

    /// The one parameter a list of integers is bound as.
    func list(_ values: some Sequence<Int>) -> SQLValue {
        let joined = values.map(String.init).joined(separator: ",")
        switch lists {
        case .postgresArrays: return .text("{" + joined + "}")
        case .sqliteJSON: return .text("[" + joined + "]")
        }
    }
}
