import CommandDurable
import Foundation

/// The store's tables in PostgreSQL: schema `awesomecommand`, the tables and indexes of `StoreSchema`
/// (written once for both databases: `double precision` for times, `bytea` for values here), and
/// `meta(version)` for the version reached. Made, or upgraded in place by the migrations after its
/// version, once, under an advisory lock, by whichever process comes first.
enum PostgresSchema {
    static var version: Int { StoreSchema.version }
    static let name = "awesomecommand"

    static func prepare(_ connection: PostgresConnection, durability: DurableDurability) throws {
        do {
            try connection.execute("SET search_path TO \(name)")
            try connection.execute("SET synchronous_commit TO \(durability == .full ? "on" : "off")")
            try connection.execute("BEGIN")
            // One process makes the schema; the others wait for it here, then find it.
            try connection.execute("SELECT pg_advisory_xact_lock(7251001)")
            let exists = try !connection.query(
                "SELECT 1 FROM pg_namespace WHERE nspname = ?", [.text(name)]
            ).isEmpty
            if exists {
                guard try connection.query("SELECT to_regclass('\(name).meta') IS NOT NULL").first?.first?.int == 1
                else {
                    try connection.execute("ROLLBACK")
                    throw DurableError.notAStore(path: "\(connection.place), schema '\(name)'")
                }
                let found = Int(try connection.query("SELECT max(version) FROM meta").first?.first?.int ?? 0)
                if found > version {
                    try connection.execute("ROLLBACK")
                    throw DurableError.newerSchema(found: found, supported: version)
                }
                try migrate(connection, from: found)
            } else {
                try connection.execute("CREATE SCHEMA \(name)")
                try connection.execute("CREATE TABLE meta(version integer NOT NULL)")
                try connection.execute("INSERT INTO meta(version) VALUES (0)")
                try migrate(connection, from: 0)
            }
            try connection.execute("COMMIT")
        } catch let error as DurableError {
            throw error
        } catch {
            try? connection.execute("ROLLBACK")
            throw DurableError.storage(message: "could not prepare the store at \(connection.place): \(error)")
        }
    }

    /// The migrations after `found`, inside the caller's transaction; `meta` records the version reached.
    private static func migrate(_ connection: PostgresConnection, from found: Int) throws {
        guard found < version else { return }
        for statement in StoreSchema.statements(from: found, .postgres) { try connection.execute(statement) }
        try connection.query("UPDATE meta SET version = ?", [.integer(Int64(version))])
    }
}
