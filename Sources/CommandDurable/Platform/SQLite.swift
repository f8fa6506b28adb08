import Foundation

#if canImport(SQLite3)
    import SQLite3
#else
    import CSQLite
#endif

// The platform layer of `CommandDurable`: SQLite's C library is reached only from this file (the SDK's
// `SQLite3` module on Apple platforms, the system's library through `CSQLite` elsewhere), so the rest
// of the module is the same everywhere.

/// A failed SQLite call: its result code and SQLite's message.
struct SQLiteError: Error, CustomStringConvertible {
    let code: Int32
    let message: String

    var description: String { "SQLite error \(code): \(message)" }

    /// The file is not a database, or is damaged (`SQLITE_NOTADB`, `SQLITE_CORRUPT`).
    var isNotADatabase: Bool { code & 0xff == SQLITE_NOTADB || code & 0xff == SQLITE_CORRUPT }
    /// Another connection holds the lock past the busy timeout.
    var isBusy: Bool { code & 0xff == SQLITE_BUSY || code & 0xff == SQLITE_LOCKED }
}

/// One SQLite connection, used by one thread at a time (the store's own thread): not `Sendable`.
/// Prepared statements are kept by their text and reused.
final class SQLiteConnection: SQLDatabase {
    private var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    let path: String

    /// Opens (creating if missing) the database at `path` (`":memory:"` for one in memory).
    init(path: String) throws {
        StoreThread.checkThread()
        self.path = path
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw SQLiteError(code: status, message: message)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Waits up to `milliseconds` for another connection's lock before a call fails busy (this thread
    /// sleeps: it is the store's own thread).
    func setBusyTimeout(milliseconds: Int32) { sqlite3_busy_timeout(handle, milliseconds) }

    /// Runs `sql` (one or more statements, no parameters, rows ignored).
    func execute(_ sql: String) throws {
        StoreThread.checkThread()
        var error: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &error)
        if status != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(error)
            throw SQLiteError(code: sqlite3_extended_errcode(handle), message: message)
        }
    }

    /// Runs one statement with `bindings`; returns its rows (each row's columns in order).
    @discardableResult
    func query(_ sql: String, _ bindings: [SQLValue]) throws -> [[SQLValue]] {
        StoreThread.checkThread()
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (offset, value) in bindings.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32
            switch value {
            case .null: status = sqlite3_bind_null(statement, index)
            case .integer(let number): status = sqlite3_bind_int64(statement, index, number)
            case .real(let number): status = sqlite3_bind_double(statement, index, number)
            case .text(let text): status = sqlite3_bind_text(statement, index, text, -1, transient)
            case .blob(let data):
                status = data.withUnsafeBytes { bytes in
                    sqlite3_bind_blob(statement, index, bytes.baseAddress, Int32(bytes.count), transient)
                }
            }
            guard status == SQLITE_OK else { throw failure() }
        }
        var rows: [[SQLValue]] = []
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { break }
            guard status == SQLITE_ROW else { throw failure() }
            let count = sqlite3_column_count(statement)
            var row: [SQLValue] = []
            row.reserveCapacity(Int(count))
            for column in 0..<count { row.append(value(statement, column)) }
            rows.append(row)
        }
        return rows
    }

    /// Rows changed by the last statement.
    var changes: Int { Int(sqlite3_changes(handle)) }

    /// A file's connection is never lost.
    var isLost: Bool { false }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw failure()
        }
        statements[sql] = statement
        return statement
    }

    private func value(_ statement: OpaquePointer, _ column: Int32) -> SQLValue {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT: return .text(String(cString: sqlite3_column_text(statement, column)))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return .blob(Data()) }
            return .blob(Data(bytes: bytes, count: count))
        default: return .null
        }
    }

    private func failure() -> SQLiteError {
        SQLiteError(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)))
    }
}

/// `SQLITE_TRANSIENT`: SQLite copies what is bound.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
