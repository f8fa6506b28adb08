import CommandDurable
import Foundation

/// The store's tables in PostgreSQL: schema `awesomecommand`, the same tables and columns as SQLite's
/// (`SQLStorage` documents them), `double precision` for times, `bytea` for values, and `meta(version)`
/// for the schema's version. Made once, under an advisory lock, by whichever process comes first.
enum PostgresSchema {
    static let version = 1
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
            } else {
                try connection.execute(
                    """
                    CREATE SCHEMA \(name);
                    CREATE TABLE runs(id text PRIMARY KEY, workflow text NOT NULL, input bytea NOT NULL,
                        state text NOT NULL, cancel_requested integer NOT NULL DEFAULT 0,
                        created double precision NOT NULL, updated double precision NOT NULL, error text,
                        error_kind text, error_step text, final_step text NOT NULL);
                    CREATE TABLE steps(run_id text NOT NULL, step_id text NOT NULL, position integer NOT NULL,
                        state text NOT NULL, attempt integer NOT NULL DEFAULT 0,
                        failures integer NOT NULL DEFAULT 0, owner text, lease_until double precision,
                        value bytea, error text, error_type text, next_attempt_at double precision,
                        started double precision, ended double precision, after text NOT NULL DEFAULT '',
                        PRIMARY KEY (run_id, step_id));
                    CREATE TABLE meta(version integer NOT NULL);
                    INSERT INTO meta(version) VALUES (\(version));
                    CREATE INDEX unfinished_runs ON runs(created) WHERE state IN ('pending', 'running');
                    CREATE INDEX ended_runs ON runs(updated) WHERE state IN ('completed', 'failed', 'cancelled');
                    CREATE INDEX live_steps ON steps(run_id) WHERE state IN ('pending', 'running');
                    """)
            }
            try connection.execute("COMMIT")
        } catch let error as DurableError {
            throw error
        } catch {
            try? connection.execute("ROLLBACK")
            throw DurableError.storage(message: "could not prepare the store at \(connection.place): \(error)")
        }
    }
}
