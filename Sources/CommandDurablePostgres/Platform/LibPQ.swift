import CLibPQ
import CommandDurable
import Foundation

// The platform layer of `CommandDurablePostgres`: PostgreSQL's C client library (libpq) is reached only
// from this file. libpq blocks: every call here runs on a store's own thread (its requests' thread, or its
// listener's), never on a command's queue, the Dispatch pool or the concurrency pool.

/// A failed statement: PostgreSQL's SQLSTATE and message.
struct PostgresError: Error, CustomStringConvertible {
    let state: String
    let message: String

    var description: String { "PostgreSQL error \(state): \(message)" }
}

/// One libpq connection, used by one thread (a store's): not `Sendable`. A statement's text is rewritten
/// once (`?` placeholders to `$1`, `$2`, ...; the store's tables named with their schema, so that no
/// session state is needed) and, on a direct connection, prepared once by its text and reused; through a
/// pooler in transaction mode (`pooled`) each runs as an unnamed statement (a later transaction may be on
/// another server connection, which does not have it). Values go as text, blobs as binary.
final class PostgresConnection: SQLDatabase {
    private var handle: OpaquePointer?
    /// Each statement's text as sent, and its prepared statement's name (direct connections), by the
    /// store's text.
    private var statements: [String: (text: String, name: String)] = [:]
    private(set) var changes = 0
    let place: String
    let pooled: Bool

    /// Connects (up to 10 s unless the connection string says otherwise). Throws
    /// `DurableError.storage` naming the server (never the password) when it cannot.
    init(_ conninfo: String, pooled: Bool = false) throws {
        StoreThread.checkThread()
        self.pooled = pooled
        place = Self.place(of: conninfo)
        // The string's own parameters override these defaults (`expand_dbname`: later keywords win).
        let keywords = ["connect_timeout", "application_name", "dbname"]
        let values = ["10", "AwesomeCommand", conninfo]
        let connection = withCStrings(keywords) { keys in
            withCStrings(values) { vals in PQconnectdbParams(keys, vals, 1) }
        }
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            let message = connection.map { Self.trimmed(PQerrorMessage($0)) } ?? "out of memory"
            PQfinish(connection)
            throw DurableError.storage(message: "could not connect to \(place): \(message)")
        }
        handle = connection
        // Notices ("relation already exists, skipping") are not printed.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
    }

    deinit { close() }

    func close() {
        if let handle { PQfinish(handle) }
        handle = nil
    }

    var isLost: Bool { handle.map { PQstatus($0) != CONNECTION_OK } ?? true }

    /// A deadlock (`40P01`) or a serialization failure (`40001`): PostgreSQL failed this transaction to
    /// let another go on; running it again succeeds.
    func serverClock() throws -> Double? {
        try query("SELECT extract(epoch from clock_timestamp())::double precision", []).first?.first?.double
    }

    func isConflict(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError else { return false }
        return error.state == "40P01" || error.state == "40001"
    }

    /// The socket to wait on for notifications.
    var socket: Int32 { handle.map { PQsocket($0) } ?? -1 }

    func execute(_ sql: String) throws {
        StoreThread.checkThread()
        guard let handle else { throw PostgresError(state: "08003", message: "the connection is closed") }
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        try check(result)
    }

    @discardableResult
    func query(_ sql: String, _ bindings: [SQLValue]) throws -> [[SQLValue]] {
        StoreThread.checkThread()
        guard let handle else { throw PostgresError(state: "08003", message: "the connection is closed") }
        let statement = try prepare(sql)
        // Each value as a C buffer (text, or a blob's bytes), freed after the call.
        var buffers: [UnsafeMutablePointer<CChar>?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        defer { for buffer in buffers { free(buffer) } }
        for value in bindings {
            switch value {
            case .null:
                buffers.append(nil)
                lengths.append(0)
                formats.append(0)
            case .integer(let number): appendText(String(number))
            case .real(let number): appendText("\(number)")
            case .text(let text): appendText(text)
            case .blob(let data):
                let buffer = malloc(max(data.count, 1))!.assumingMemoryBound(to: CChar.self)
                data.withUnsafeBytes { bytes in
                    if let base = bytes.baseAddress { memcpy(buffer, base, data.count) }
                }
                buffers.append(buffer)
                lengths.append(Int32(data.count))
                formats.append(1)
            }
        }
        func appendText(_ text: String) {
            buffers.append(strdup(text))
            lengths.append(0)
            formats.append(0)
        }
        let result = buffers.withUnsafeBufferPointer { values in
            values.withMemoryRebound(to: UnsafePointer<CChar>?.self) { values in
                if pooled {
                    return PQexecParams(
                        handle, statement.text, Int32(bindings.count), nil, values.baseAddress, lengths, formats, 0)
                }
                return PQexecPrepared(
                    handle, statement.name, Int32(bindings.count), values.baseAddress, lengths, formats, 0)
            }
        }
        defer { PQclear(result) }
        try check(result)
        changes = Int(String(cString: PQcmdTuples(result))) ?? 0
        guard PQresultStatus(result) == PGRES_TUPLES_OK else { return [] }
        let rows = PQntuples(result)
        let columns = PQnfields(result)
        var table: [[SQLValue]] = []
        table.reserveCapacity(Int(rows))
        for row in 0..<rows {
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columns))
            for column in 0..<columns { values.append(value(result, row, column)) }
            table.append(values)
        }
        return table
    }

    // MARK: Notifications

    /// Reads what arrived on the socket; returns the notifications' payloads. Throws when the connection
    /// is lost.
    func notifications() throws -> [String] {
        guard let handle, PQconsumeInput(handle) == 1 else {
            throw PostgresError(state: "08006", message: handle.map { Self.trimmed(PQerrorMessage($0)) } ?? "closed")
        }
        var payloads: [String] = []
        while let notify = PQnotifies(handle) {
            payloads.append(String(cString: notify.pointee.extra))
            PQfreemem(notify)
        }
        return payloads
    }

    // MARK: Internals

    /// "PostgreSQL at host:port, database 'db', user 'user'" from a connection string or URL, without its
    /// password.
    /// Throws unless `location` is a `postgresql://` or `postgres://` URL, `key=value` pairs, or empty
    /// (libpq's defaults and `PG*` variables): libpq takes any other string as a database's name and
    /// quotes it back in its errors, password included.
    static func checkLocation(_ location: String) throws {
        let trimmed = location.trimmingCharacters(in: .whitespaces)
        let lowered = trimmed.lowercased()
        if trimmed.isEmpty || lowered.hasPrefix("postgresql://") || lowered.hasPrefix("postgres://") { return }
        if !trimmed.contains("://") && trimmed.contains("=") { return }
        throw DurableError.storage(
            message: "'\(redacted(location))' is not a PostgreSQL location: give a URL "
                + "(postgresql://user@host:5432/database, the password from PGPASSWORD or ~/.pgpass) or "
                + "key=value pairs (host=db.internal port=5432 dbname=app user=app)")
    }

    /// `location` with the password of a URL's user part left out (`scheme://user:secret@host` ->
    /// `scheme://user:***@host`).
    static func redacted(_ location: String) -> String {
        guard let scheme = location.range(of: "://") else { return location }
        let rest = location[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        guard let at = rest[..<authorityEnd].lastIndex(of: "@"),
            let colon = rest[..<at].firstIndex(of: ":")
        else { return location }
        return String(location[..<colon]) + ":***" + String(location[at...])
    }

    static func place(of conninfo: String) -> String {
        var fields: [String: String] = [:]
        if let options = PQconninfoParse(conninfo, nil) {
            var option = options
            while let keyword = option.pointee.keyword {
                if let value = option.pointee.val { fields[String(cString: keyword)] = String(cString: value) }
                option += 1
            }
            PQconninfoFree(options)
        }
        let host = fields["host"] ?? fields["hostaddr"] ?? "localhost"
        let port = fields["port"] ?? "5432"
        var place = "PostgreSQL at \(host):\(port)"
        if let database = fields["dbname"] { place += ", database '\(database)'" }
        if let user = fields["user"] { place += ", user '\(user)'" }
        return place
    }

    private func prepare(_ sql: String) throws -> (text: String, name: String) {
        if let statement = statements[sql] { return statement }
        let text = Self.rewritten(sql)
        let name = pooled ? "" : "s\(statements.count)"
        if !pooled {
            let result = PQprepare(handle, name, text, 0, nil)
            defer { PQclear(result) }
            try check(result)
        }
        statements[sql] = (text, name)
        return (text, name)
    }

    /// The store's tables, named with their schema in the statements' texts.
    static let tables: Set<Substring> = ["runs", "steps", "owners", "meta"]

    /// `sql` as PostgreSQL takes it: `?` placeholders numbered (`$1`, `$2`, ...), and the store's tables
    /// (`runs`, `steps`, `owners`, `meta`, where a name stands alone) named with their schema
    /// (`awesomecommand.steps`); nothing inside quotes is changed.
    static func rewritten(_ sql: String) -> String {
        var text = ""
        var index = 0
        var quoted = false
        var word = ""
        func flush() {
            if !word.isEmpty && tables.contains(Substring(word)) && text.last != "." {
                text += PostgresSchema.name + "."
            }
            text += word
            word = ""
        }
        for character in sql {
            if quoted {
                text.append(character)
                if character == "'" { quoted = false }
                continue
            }
            if character.isLetter || character == "_" || (!word.isEmpty && character.isNumber) {
                word.append(character)
                continue
            }
            flush()
            switch character {
            case "'":
                quoted = true
                text.append(character)
            case "?":
                index += 1
                text += "$\(index)"
            default:
                text.append(character)
            }
        }
        flush()
        return text
    }

    private func check(_ result: OpaquePointer?) throws {
        let status = result.map { PQresultStatus($0) } ?? PGRES_FATAL_ERROR
        guard status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK else { return }
        let state = result.flatMap { PQresultErrorField($0, 67 /* PG_DIAG_SQLSTATE, 'C' */) }.map {
            String(cString: $0)
        }
        let message = result.map { Self.trimmed(PQresultErrorMessage($0)) } ?? ""
        throw PostgresError(
            state: state ?? "08006",
            message: message.isEmpty ? handle.map { Self.trimmed(PQerrorMessage($0)) } ?? "no result" : message)
    }

    private func value(_ result: OpaquePointer?, _ row: Int32, _ column: Int32) -> SQLValue {
        if PQgetisnull(result, row, column) == 1 { return .null }
        guard let text = PQgetvalue(result, row, column) else { return .null }
        switch PQftype(result, column) {
        case 16: return .integer(text.pointee == 0x74 ? 1 : 0)  // bool: 't' or 'f'
        case 20, 21, 23, 26: return .integer(Int64(String(cString: text)) ?? 0)
        case 700, 701, 1700: return .real(Double(String(cString: text)) ?? 0)
        case 17:
            var length = 0
            guard let bytes = PQunescapeBytea(UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), &length)
            else { return .blob(Data()) }
            defer { PQfreemem(bytes) }
            return .blob(Data(bytes: bytes, count: length))
        default: return .text(String(cString: text))
        }
    }

    private static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        message.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
    }
}

/// Calls `body` with `strings` as a NULL-terminated array of C strings.
private func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> T) -> T {
    let copies = strings.map { strdup($0) }
    defer { for copy in copies { free(copy) } }
    let pointers = copies.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
