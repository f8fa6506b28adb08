import CommandCore
import Foundation

// The embedded store: an SQLite file (WAL), `PRAGMA user_version` = the schema's version (`StoreSchema`), and the owners
// table through which processes of one host judge each other's liveness.
extension SQLStorage {
    /// Opens (or creates) the SQLite store at `path`, checking it before writing anything: a file that is
    /// not a store, or one of a newer schema, is left untouched.
    convenience init(path: String, durability: DurableDurability, leaseSeconds: Double) throws {
        let owner = Self.makeOwner()
        try self.init(
            owner: owner,
            dialect: SQLDialect(
                begin: "BEGIN IMMEDIATE", claimLock: "", judgesOwnerProcesses: true, notify: nil, place: "'\(path)'",
                lists: .sqliteJSON),
            leaseSeconds: leaseSeconds
        ) {
            let connection: SQLiteConnection
            do {
                connection = try SQLiteConnection(path: path)
            } catch {
                throw DurableError.storage(message: "could not open '\(path)': \(error)")
            }
            connection.setBusyTimeout(milliseconds: 10_000)
            do {
                try Self.prepare(connection, path: path, durability: durability)
                try connection.query(
                    "INSERT OR REPLACE INTO owners(id, host, pid, process_start, seen) VALUES (?, ?, ?, ?, ?)",
                    [
                        .text(owner), .text(ProcessIdentity.host), .integer(Int64(ProcessIdentity.pid)),
                        ProcessIdentity.startTime(of: ProcessIdentity.pid).map { .real($0) } ?? .null,
                        .real(Date().timeIntervalSince1970),
                    ])
            } catch let error as DurableError {
                connection.close()
                throw error
            } catch {
                connection.close()
                throw DurableError.storage(message: "could not open '\(path)': \(error)")
            }
            return connection
        }
    }

    private static func prepare(_ connection: any SQLDatabase, path: String, durability: DurableDurability) throws {
        // Reads first: nothing is written to a file that turns out not to be ours.
        let version: Int
        let tables: Set<String>
        do {
            version = Int(try connection.query("PRAGMA user_version").first?.first?.int ?? 0)
            tables = Set(
                try connection.query("SELECT name FROM sqlite_master WHERE type = 'table'").compactMap {
                    $0.first?.string
                })
        } catch let error as SQLiteError where error.isNotADatabase {
            throw DurableError.notAStore(path: path)
        } catch {
            throw DurableError.storage(message: "could not read '\(path)': \(error)")
        }
        if version > schemaVersion { throw DurableError.newerSchema(found: version, supported: schemaVersion) }
        let ours: Set<String> = ["runs", "steps", "owners"]
        if version == 0 && !tables.isEmpty { throw DurableError.notAStore(path: path) }
        if version > 0 && !ours.isSubset(of: tables) { throw DurableError.notAStore(path: path) }
        do {
            if path != ":memory:" { try connection.execute("PRAGMA journal_mode = WAL") }
            try connection.execute(durability == .full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
            // The migrations after the file's version, in one transaction (a new file: all of them).
            if version < schemaVersion {
                try connection.execute("BEGIN IMMEDIATE")
                for statement in StoreSchema.statements(from: version, .sqlite) { try connection.execute(statement) }
                try connection.execute("PRAGMA user_version = \(schemaVersion)")
                try connection.execute("COMMIT")
            }
        } catch let error as SQLiteError where error.isNotADatabase {
            throw DurableError.notAStore(path: path)
        } catch {
            try? connection.execute("ROLLBACK")
            throw DurableError.storage(message: "could not prepare '\(path)': \(error)")
        }
    }
}
