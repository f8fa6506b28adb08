import Foundation

/// A PostgreSQL server of your own for tests and examples: `initdb` into a temporary folder, `postgres`
/// on 127.0.0.1 and a free port, stopped (`pg_ctl stop`) and deleted by ``stop()`` (and at the process's
/// exit).
///
/// ```swift
/// let server = try await ThrowawayPostgres.start()
/// let url = try await server.makeDatabase()          // postgresql://postgres:…@127.0.0.1:<port>/<fresh>
/// let store = try DurableStore(postgres: url)
/// ```
///
/// PostgreSQL's binaries come from `AWESOMECOMMAND_PG_BIN`, then `pg_config --bindir`, then
/// `/usr/lib/postgresql/<version>/bin`, then Homebrew's folders; without them ``start(fsync:)`` throws
/// ``Unavailable``, whose message says how to install them. PostgreSQL refuses to run as root: as root,
/// the server runs as the `postgres` user (`runuser`), which owns its folder.
///
/// **Threads.** The `async` calls run the programs on a thread of their own (they wait for processes),
/// never on the concurrency pool's threads.
public final class ThrowawayPostgres: Sendable {
    /// PostgreSQL's binaries are not installed here.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// The server's port on 127.0.0.1.
    public let port: Int
    /// Its superuser (`postgres`) and password (host connections use `scram-sha-256`).
    public let user = "postgres"
    public let password = "throwaway"
    /// Where its data, log and socket are.
    public let folder: URL
    private let bin: URL
    private let asPostgres: Bool
    private let options: [String]
    /// The running server's process (`postgres` itself, in the foreground: `pg_ctl start` would leave a
    /// daemon holding the descriptors Foundation's `Process` watches, and never be seen to end).
    private let server = LockedValue<Process?>(nil)

    private init(port: Int, folder: URL, bin: URL, asPostgres: Bool, options: [String]) {
        self.port = port
        self.folder = folder
        self.bin = bin
        self.asPostgres = asPostgres
        self.options = options
    }

    /// Starts a server (about a second or two). `fsync: false` for tests (a server restart keeps what
    /// committed; a machine crash may not), true for measurements.
    public static func start(fsync: Bool = false) async throws -> ThrowawayPostgres {
        try await offThePool { try startNow(fsync: fsync) }
    }

    /// ``start(fsync:)`` on the calling thread (a program's main thread; never the concurrency pool's).
    public static func startNow(fsync: Bool = false) throws -> ThrowawayPostgres {
        let bin = try binaries()
        let root = getuid() == 0
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "awesomecommand-postgres-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let passwordFile = folder.appendingPathComponent("password")
        try Data("throwaway\n".utf8).write(to: passwordFile)
        if root { try chownToPostgres(folder) }
        let data = folder.appendingPathComponent("data").path
        try run(
            bin.appendingPathComponent("initdb"),
            [
                "-D", data, "-U", "postgres", "--pwfile=\(passwordFile.path)", "--auth-local=trust",
                "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync",
            ], asPostgres: root)
        var lastError: (any Error)?
        for _ in 0..<8 {
            let port = Int.random(in: 20_000..<60_000)
            var options = [
                "-p", "\(port)", "-c", "listen_addresses=127.0.0.1", "-k", folder.path, "-c", "max_connections=300",
            ]
            if !fsync {
                options += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
            }
            let server = ThrowawayPostgres(port: port, folder: folder, bin: bin, asPostgres: root, options: options)
            do {
                try server.launch()
                registry.withLock { $0.append(server) }
                return server
            } catch {
                lastError = error  // most likely the port was taken: another
            }
        }
        try? FileManager.default.removeItem(at: folder)
        throw lastError ?? Unavailable(description: "PostgreSQL did not start")
    }

    /// The URL of the database `name` (default `postgres`).
    public func url(database: String = "postgres", password: String? = nil) -> String {
        "postgresql://\(user):\(password ?? self.password)@127.0.0.1:\(port)/\(database)"
    }

    /// Creates a fresh database and returns its URL.
    public func makeDatabase() async throws -> String {
        try await offThePool { try self.makeDatabaseNow() }
    }

    /// ``makeDatabase()`` on the calling thread.
    public func makeDatabaseNow() throws -> String {
        let name = "test_\(UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: ""))"
        try psqlNow("CREATE DATABASE \(name)")
        return url(database: name)
    }

    /// Runs `sql` in `database` with `psql` (as the superuser).
    public func psql(_ sql: String, database: String = "postgres") async throws {
        try await offThePool { try self.psqlNow(sql, database: database) }
    }

    /// ``psql(_:database:)`` on the calling thread.
    public func psqlNow(_ sql: String, database: String = "postgres") throws {
        try Self.run(
            bin.appendingPathComponent("psql"),
            ["-h", folder.path, "-p", "\(port)", "-U", user, "-d", database, "-v", "ON_ERROR_STOP=1", "-qc", sql],
            asPostgres: asPostgres)
    }

    /// Restarts the server as `pg_ctl restart -m fast` does (a fast shutdown, then a start on the same
    /// port): every connection is cut.
    public func restart() async throws {
        try await offThePool {
            try self.pgctl(["stop", "-w", "-m", "fast", "-t", "60"])
            self.takeServer()?.waitUntilExit()
            try self.launch()
        }
    }

    /// Stops the server (a fast shutdown: every connection is cut) and keeps its data: an outage, until
    /// ``startAgain()`` starts it on the same port.
    public func halt() async throws {
        try await offThePool {
            try self.pgctl(["stop", "-w", "-m", "fast", "-t", "60"])
            self.takeServer()?.waitUntilExit()
        }
    }

    /// Starts the server ``halt()`` stopped, on the same port, and returns once it accepts connections.
    public func startAgain() async throws {
        try await offThePool { try self.launch() }
    }

    /// Stops the server and deletes its folder.
    public func stop() {
        try? pgctl(["stop", "-m", "immediate", "-w", "-t", "60"])
        takeServer()?.waitUntilExit()
        try? FileManager.default.removeItem(at: folder)
        registry.withLock { servers in servers.removeAll { $0 === self } }
    }

    // MARK: Internals

    private func takeServer() -> Process? {
        server.withLock { process in
            defer { process = nil }
            return process
        }
    }

    private var data: String { folder.appendingPathComponent("data").path }

    /// Starts `postgres` and waits until it accepts connections (`pg_isready`, every 50 ms, up to 60 s),
    /// or throws when it ended first (its log's last lines in the error).
    private func launch() throws {
        let process = Process()
        let (executable, arguments) = Self.command(
            bin.appendingPathComponent("postgres").path, ["-D", data] + options, asPostgres: asPostgres)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let log = folder.appendingPathComponent("log")
        if !FileManager.default.fileExists(atPath: log.path) {
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        }
        let output = try FileHandle(forWritingTo: log)
        output.seekToEndOfFile()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try? output.close()
        server.withLock { $0 = process }
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if !process.isRunning {
                _ = takeServer()
                let tail = (try? String(contentsOf: log, encoding: .utf8))?.split(separator: "\n").suffix(3)
                throw Unavailable(
                    description: "postgres ended before accepting connections: "
                        + (tail?.joined(separator: " / ") ?? "no log"))
            }
            if (try? Self.run(
                bin.appendingPathComponent("pg_isready"), ["-h", "127.0.0.1", "-p", "\(port)", "-q"],
                asPostgres: false)) != nil
            {
                return
            }
            Thread.sleep(forTimeInterval: 0.05)  // its own thread: polling a server that has no event to wait on
        }
        throw Unavailable(description: "postgres did not accept connections within 60 s (log: \(log.path))")
    }

    private func pgctl(_ arguments: [String]) throws {
        try Self.run(bin.appendingPathComponent("pg_ctl"), arguments + ["-D", data], asPostgres: asPostgres)
    }

    /// Where PostgreSQL's binaries are, or `Unavailable`.
    static func binaries() throws -> URL {
        var candidates: [String] = []
        if let configured = ProcessInfo.processInfo.environment["AWESOMECOMMAND_PG_BIN"] {
            candidates.append(configured)
        }
        if let bindir = try? capture("/usr/bin/env", ["pg_config", "--bindir"]) { candidates.append(bindir) }
        let debian = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        candidates += debian.sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }.map { "/usr/lib/postgresql/\($0)/bin" }
        candidates += ["/opt/homebrew/bin", "/usr/local/bin", "/opt/homebrew/opt/postgresql@16/bin"]
        for folder in candidates
        where FileManager.default.isExecutableFile(atPath: "\(folder)/initdb")
            && FileManager.default.isExecutableFile(atPath: "\(folder)/pg_ctl")
        {
            return URL(fileURLWithPath: folder)
        }
        throw Unavailable(
            description: "PostgreSQL's server binaries (initdb, pg_ctl) were not found: install them "
                + "(Debian: apt-get install postgresql; macOS: brew install postgresql@16), or set "
                + "AWESOMECOMMAND_PG_BIN to their folder.")
    }

    private static func chownToPostgres(_ folder: URL) throws {
        guard let entry = getpwnam("postgres") else {
            throw Unavailable(description: "running as root, and there is no 'postgres' user to run PostgreSQL as")
        }
        try FileManager.default.setAttributes(
            [.ownerAccountID: entry.pointee.pw_uid, .groupOwnerAccountID: entry.pointee.pw_gid],
            ofItemAtPath: folder.path)
        try FileManager.default.setAttributes(
            [.ownerAccountID: entry.pointee.pw_uid], ofItemAtPath: folder.appendingPathComponent("password").path)
    }

    @discardableResult
    private static func run(_ program: URL, _ arguments: [String], asPostgres: Bool) throws -> String {
        let (executable, arguments) = command(program.path, arguments, asPostgres: asPostgres)
        return try capture(executable, arguments)
    }

    /// How to run one of PostgreSQL's programs: through a shell that gives it a usual 8 MiB stack (a
    /// test run may have lowered the limit its children inherit: `ulimit -s 512`, which `initdb` and the
    /// server refuse), as the `postgres` user when this process is root.
    private static func command(_ program: String, _ arguments: [String], asPostgres: Bool) -> (String, [String]) {
        let shell = ["/bin/sh", "-c", "ulimit -S -s 8192 2>/dev/null; exec \"$0\" \"$@\"", program] + arguments
        if asPostgres { return ("/usr/sbin/runuser", ["-u", "postgres", "--"] + shell) }
        return (shell[0], Array(shell.dropFirst()))
    }

    private static func capture(_ program: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        // Output to a file, not a pipe: the server `pg_ctl` starts would hold a pipe open, and reading it to
        // its end would wait for the server to stop.
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent(
            "awesomecommand-postgres-output-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: outputPath.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: outputPath) }
        let output = try FileHandle(forWritingTo: outputPath)
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try? output.close()
        let text = String(decoding: (try? Data(contentsOf: outputPath)) ?? Data(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0 else {
            throw Unavailable(
                description: "\(program) \(arguments.joined(separator: " ")) ended with "
                    + "\(process.terminationStatus): \(text)")
        }
        return text
    }
}

extension ThrowawayPostgres {
    /// Starts PgBouncer (Debian's `pgbouncer`, or `AWESOMECOMMAND_PGBOUNCER`) on 127.0.0.1 in front of this
    /// server, in transaction pooling mode (a server connection per transaction: no session state, no
    /// prepared statement kept between transactions), with this server's user and password. Stopped by
    /// ``ThrowawayPgBouncer/stop()`` or at the process's exit with the server. Throws
    /// ``Unavailable`` when PgBouncer is not installed.
    public func startPgBouncer() async throws -> ThrowawayPgBouncer {
        try await offThePool { try ThrowawayPgBouncer.startNow(in: self) }
    }

    /// Whether its processes run as the `postgres` user (the tests run as root).
    fileprivate var runsAsPostgres: Bool { getuid() == 0 }

    /// Whether something on 127.0.0.1 at `port` answers as PostgreSQL does (`pg_isready`).
    fileprivate func answers(port: Int) -> Bool {
        (try? Self.run(
            bin.appendingPathComponent("pg_isready"), ["-h", "127.0.0.1", "-p", "\(port)", "-q"], asPostgres: false))
            != nil
    }

    fileprivate static func launchCommand(_ program: String, _ arguments: [String], asPostgres: Bool) -> (
        String, [String]
    ) {
        command(program, arguments, asPostgres: asPostgres)
    }
}

/// PgBouncer in front of a ``ThrowawayPostgres``, in transaction pooling mode, on 127.0.0.1: made by
/// ``ThrowawayPostgres/startPgBouncer()``.
public final class ThrowawayPgBouncer: Sendable {
    /// Where it listens (127.0.0.1).
    public let port: Int
    private let server: ThrowawayPostgres
    private let folder: URL
    private let process = LockedValue<Process?>(nil)

    private init(port: Int, server: ThrowawayPostgres, folder: URL) {
        self.port = port
        self.server = server
        self.folder = folder
    }

    /// A URL of `database` through PgBouncer (its databases are the server's).
    public func url(database: String = "postgres") -> String {
        "postgresql://\(server.user):\(server.password)@127.0.0.1:\(port)/\(database)"
    }

    /// The same database's URL through PgBouncer, from the server's URL of it.
    public func url(for serverURL: String) -> String {
        url(database: String(serverURL.split(separator: "/").last ?? "postgres"))
    }

    static func binary() throws -> String {
        var candidates: [String] = []
        if let configured = ProcessInfo.processInfo.environment["AWESOMECOMMAND_PGBOUNCER"] {
            candidates.append(configured)
        }
        candidates += [
            "/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer", "/opt/homebrew/bin/pgbouncer",
        ]
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        throw ThrowawayPostgres.Unavailable(
            description: "PgBouncer was not found: install it (Debian: apt-get install pgbouncer; macOS: brew install "
                + "pgbouncer), or set AWESOMECOMMAND_PGBOUNCER to its path.")
    }

    static func startNow(in server: ThrowawayPostgres) throws -> ThrowawayPgBouncer {
        let binary = try binary()
        let folder = server.folder.appendingPathComponent("pgbouncer-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let users = folder.appendingPathComponent("userlist.txt")
        try Data("\"\(server.user)\" \"\(server.password)\"\n".utf8).write(to: users)
        var lastError: (any Error)?
        for _ in 0..<8 {
            let port = Int.random(in: 20_000..<60_000)
            let config = folder.appendingPathComponent("pgbouncer.ini")
            try Data(
                """
                [databases]
                * = host=127.0.0.1 port=\(server.port)
                [pgbouncer]
                listen_addr = 127.0.0.1
                listen_port = \(port)
                unix_socket_dir =
                auth_type = scram-sha-256
                auth_file = \(users.path)
                pool_mode = transaction
                max_client_conn = 500
                default_pool_size = 20
                logfile = \(folder.appendingPathComponent("pgbouncer.log").path)

                """.utf8
            ).write(to: config)
            if server.runsAsPostgres, let entry = getpwnam("postgres") {
                for path in [folder.path, users.path, config.path] {
                    try FileManager.default.setAttributes(
                        [.ownerAccountID: entry.pointee.pw_uid, .groupOwnerAccountID: entry.pointee.pw_gid],
                        ofItemAtPath: path)
                }
            }
            let pooler = ThrowawayPgBouncer(port: port, server: server, folder: folder)
            do {
                try pooler.launch(binary, config: config.path)
                poolers.withLock { $0.append(pooler) }
                return pooler
            } catch {
                lastError = error  // most likely the port was taken: another
            }
        }
        throw lastError ?? ThrowawayPostgres.Unavailable(description: "PgBouncer did not start")
    }

    private func launch(_ binary: String, config: String) throws {
        let process = Process()
        let (executable, arguments) = ThrowawayPostgres.launchCommand(
            binary, [config], asPostgres: server.runsAsPostgres)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process.withLock { $0 = process }
        // Listening once it answers as a server does.
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if !process.isRunning {
                let log = try? String(
                    contentsOf: folder.appendingPathComponent("pgbouncer.log"), encoding: .utf8)
                throw ThrowawayPostgres.Unavailable(
                    description:
                        "pgbouncer ended at once: \(log?.split(separator: "\n").suffix(3).joined(separator: " / ") ?? "no log")"
                )
            }
            if server.answers(port: port) { return }
            Thread.sleep(forTimeInterval: 0.05)  // its own thread: polling a port that has no event to wait on
        }
        stop()
        throw ThrowawayPostgres.Unavailable(description: "pgbouncer did not listen within 30 s")
    }

    /// Stops it (its clients' connections are cut).
    public func stop() {
        if let process = process.withLock({ process -> Process? in
            defer { process = nil }
            return process
        }) {
            process.terminate()
            process.waitUntilExit()
        }
        poolers.withLock { $0.removeAll { $0 === self } }
    }
}

/// Poolers still running, stopped at the process's exit.
private let poolers: LockedValue<[ThrowawayPgBouncer]> = {
    atexit {
        for pooler in poolers.withLock({ $0 }) { pooler.stop() }
    }
    return LockedValue<[ThrowawayPgBouncer]>([])
}()

/// Servers still running, stopped at the process's exit.
private let registry: LockedValue<[ThrowawayPostgres]> = {
    atexit {
        for server in registry.withLock({ $0 }) { server.stop() }
    }
    return LockedValue<[ThrowawayPostgres]>([])
}()

/// A value behind a lock (this module depends on nothing, so not `CommandCore`'s `Locked`).
private final class LockedValue<Value>: @unchecked Sendable {
    // `@unchecked Sendable`: `value` is guarded by `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Runs `body` on a thread of its own and awaits it (it waits for processes: never on the pool).
private func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
        }
        thread.start()
    }
}
