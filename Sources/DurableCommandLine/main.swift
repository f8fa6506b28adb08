// `durable`: the runs of a durable store, seen and steered from a shell. See `Usage.text`.
import CommandDurable
import CommandDurablePostgres
import Foundation

/// What went wrong, and the exit status a script can rely on.
struct Failure: Error {
    let status: Int32
    let message: String

    static func usage(_ message: String) -> Failure { Failure(status: Status.usage, message: message) }
}

enum Status {
    static let ok: Int32 = 0
    /// The store failed (cannot be opened, a database error).
    static let store: Int32 = 1
    /// A command line that cannot be used.
    static let usage: Int32 = 2
    /// No such run, or no store at the path.
    static let notFound: Int32 = 3
    /// The run's state does not allow it (a retry of a run not failed or cancelled).
    static let state: Int32 = 4
}

enum Usage {
    static let text = """
        usage: durable [--store PATH|URL] <command> [options]

        The store is an SQLite file's path or a PostgreSQL URL, from --store or DURABLE_STORE. A PostgreSQL
        password is read only from the environment (DURABLE_STORE, PGPASSWORD) or PGPASSFILE, never from
        --store, and never printed.

        commands:
          runs [--state S] [--workflow W] [--tag T] [--limit N] [--json]   the runs, oldest first
          show RUN [--json]                                               a run's steps and graph
          cancel RUN                                                      records the run's cancel
          retry RUN                                                       runs a failed or cancelled run again
          prune --ended-before AGE                                        deletes runs ended before AGE ago (7d, 12h, 30m, 45s)
          watch [RUN] [--workflow W] [--tag T] [--json]                   prints the runs' (or one run's) changes as they happen
          serve [--port P] [--host H] [--token T]                         the inspector in a browser (127.0.0.1:8080)
          help [COMMAND]

        exit status: 0 done, 1 the store failed, 2 a command line that cannot be used, 3 no such run or
        store, 4 the run's state does not allow it.
        """

    static let commands: [String: String] = [
        "runs": """
        usage: durable runs [--state S] [--workflow W] [--tag T] [--limit N] [--json]
        Lists the runs, oldest first: id, state, workflow, created, steps completed of all, error.
        --state: pending, running, completed, failed or cancelled (repeat for several).
        """,
        "show": """
        usage: durable show RUN [--json]
        A run's steps (state, attempts, owner, start and end, error, value size) and its graph as text.
        """,
        "cancel":
            "usage: durable cancel RUN\nRecords the run's cancel; workers stop its steps. Exit 3 for no such run.",
        "retry": """
        usage: durable retry RUN
        Runs a failed or cancelled run again from where it ended (its completed steps kept), by the workers
        or the next resume. Exit 4 for a run that is running or completed.
        """,
        "prune": "usage: durable prune --ended-before AGE\nDeletes the runs ended before AGE ago (7d, 12h, 30m, 45s).",
        "watch": """
        usage: durable watch [RUN] [--workflow W] [--tag T] [--json]
        Without RUN: prints each change of the runs, from any process, as it happens (store.changes): the time,
        the change, the run and step, the attempt, the state or error; a JSON object a line with --json; runs
        until interrupted. With RUN: prints the run's state and each step's, then each change of them as it is
        recorded (woken by the run's changes, and looking every second); exits 0 once it ended (3 if there is
        no such run).
        """,
        "serve": """
        usage: durable serve [--port P] [--host H] [--token T]
        Serves the inspector (DurableInspector): the runs, each run's graph and timeline, cancel and retry, live
        updates. Binds 127.0.0.1 unless --host says otherwise; cancel and retry need the token when one is set
        (--token or DURABLE_TOKEN), and a token is required to listen beyond loopback. Runs until interrupted.
        """,
    ]
}

/// The command line, parsed: the store's location, the command, its arguments and options.
struct CommandLineArguments {
    var store: String?
    var storeFromFlag = false
    var command = "help"
    var positional: [String] = []
    var options: [String: [String]] = [:]
    var flags: Set<String> = []

    static let valued: Set<String> = [
        "--state", "--workflow", "--tag", "--limit", "--ended-before", "--store", "--port", "--host", "--token",
    ]
    static let switches: Set<String> = ["--json", "--help", "-h"]

    init(_ arguments: [String], environment: [String: String]) throws {
        var index = 0
        var commandSeen = false
        while index < arguments.count {
            let argument = arguments[index]
            if Self.valued.contains(argument) {
                guard index + 1 < arguments.count else { throw Failure.usage("\(argument) needs a value") }
                if argument == "--store" {
                    store = arguments[index + 1]
                    storeFromFlag = true
                } else {
                    options[argument, default: []].append(arguments[index + 1])
                }
                index += 2
                continue
            }
            if Self.switches.contains(argument) {
                flags.insert(argument == "-h" ? "--help" : argument)
            } else if argument.hasPrefix("-") {
                throw Failure.usage("unknown option \(argument) (durable help)")
            } else if !commandSeen {
                command = argument
                commandSeen = true
            } else {
                positional.append(argument)
            }
            index += 1
        }
        if store == nil { store = environment["DURABLE_STORE"] }
    }
}

func openStore(_ arguments: CommandLineArguments) async throws -> DurableStore {
    guard let location = arguments.store, !location.isEmpty else {
        throw Failure.usage("no store: give --store PATH|URL or set DURABLE_STORE")
    }
    if location.hasPrefix("postgres://") || location.hasPrefix("postgresql://") {
        if arguments.storeFromFlag, let components = URLComponents(string: location), components.password != nil {
            throw Failure.usage(
                "--store holds a password: give it in PGPASSWORD, PGPASSFILE or DURABLE_STORE, not on the command line")
        }
        return try await DurableStore(postgres: location)
    }
    guard FileManager.default.fileExists(atPath: location) else {
        throw Failure(status: Status.notFound, message: "no store at '\(location)'")
    }
    return try DurableStore(path: location)
}

func one(_ arguments: CommandLineArguments, _ what: String) throws -> String {
    guard arguments.positional.count == 1 else { throw Failure.usage("durable \(arguments.command) takes one \(what)") }
    return arguments.positional[0]
}

func age(_ text: String) throws -> TimeInterval {
    let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
    guard let unit = text.last.flatMap({ units[$0] }), let count = Double(text.dropLast()), count >= 0 else {
        throw Failure.usage("'\(text)' is not an age: give a number and s, m, h or d (7d)")
    }
    return count * unit
}

/// A date as ISO 8601 (UTC).
func stamp(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }

func json(_ value: Any) -> String {
    let data = (try? JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys])) ?? Data()
    return String(decoding: data, as: UTF8.self)
}

func runObject(_ run: DurableRunRecord) -> [String: Any] {
    [
        "id": run.id, "workflow": run.workflow, "state": run.state.rawValue, "created": stamp(run.created),
        "updated": stamp(run.updated), "error": run.error ?? NSNull(), "tags": run.tags.sorted(),
        "steps": run.steps.count, "completed": run.steps.filter { $0.state == .completed }.count,
        "parent": run.parent ?? NSNull(),
    ]
}

func stepObject(_ step: DurableStepRecord) -> [String: Any] {
    [
        "id": step.id, "state": step.state.rawValue, "attempts": step.attempts, "owner": step.owner ?? NSNull(),
        "started": step.started.map { stamp($0) } ?? NSNull(),
        "ended": step.ended.map { stamp($0) } ?? NSNull(), "error": step.lastError ?? NSNull(),
        "valueBytes": step.value?.count ?? NSNull(), "after": step.after,
    ]
}

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? String(text.prefix(width)) : text + String(repeating: " ", count: width - text.count)
}

func run(_ arguments: CommandLineArguments) async throws -> Int32 {
    if arguments.command == "help" || (arguments.flags.contains("--help") && arguments.command == "help") {
        let topic = arguments.positional.first
        print(topic.flatMap { Usage.commands[$0] } ?? Usage.text)
        return Status.ok
    }
    guard let help = Usage.commands[arguments.command] else {
        throw Failure.usage("unknown command '\(arguments.command)' (durable help)")
    }
    if arguments.flags.contains("--help") {
        print(help)
        return Status.ok
    }
    let store = try await openStore(arguments)
    defer { store.close() }
    switch arguments.command {
    case "runs":
        var filter = DurableRunFilter()
        if let states = arguments.options["--state"] {
            filter.states = Set(
                try states.map { name in
                    guard let state = DurableRunState(rawValue: name) else {
                        throw Failure.usage("'\(name)' is not a state: pending, running, completed, failed, cancelled")
                    }
                    return state
                })
        }
        filter.workflow = arguments.options["--workflow"]?.last
        if let tags = arguments.options["--tag"] { filter.tags = Set(tags) }
        if let limit = arguments.options["--limit"]?.last {
            guard let count = Int(limit), count >= 0 else { throw Failure.usage("--limit takes a number") }
            filter.limit = count
        }
        let runs = try await store.runs(filter)
        if arguments.flags.contains("--json") {
            print(json(runs.map(runObject)))
        } else {
            print("\(pad("ID", 28)) \(pad("STATE", 9)) \(pad("WORKFLOW", 16)) \(pad("CREATED", 20)) STEPS  ERROR")
            for run in runs {
                let done = "\(run.steps.filter { $0.state == .completed }.count)/\(run.steps.count)"
                print(
                    "\(pad(run.id, 28)) \(pad(run.state.rawValue, 9)) \(pad(run.workflow, 16)) "
                        + "\(pad(stamp(run.created), 20)) \(pad(done, 6)) \(run.error ?? "")")
            }
        }
    case "show":
        let id = try one(arguments, "run id")
        guard let run = try await store.runs(.run(id)).first else {
            throw Failure(status: Status.notFound, message: "no run '\(id)' in the store")
        }
        if arguments.flags.contains("--json") {
            var object = runObject(run)
            object["steps"] = run.steps.map(stepObject)
            print(json(object))
        } else {
            print("run \(run.id) (\(run.workflow)): \(run.state.rawValue), created \(stamp(run.created))")
            if let error = run.error { print("error: \(error)") }
            if let parent = run.parent { print("parent: \(parent)") }
            print(
                "\(pad("STEP", 16)) \(pad("STATE", 9)) TRY \(pad("STARTED", 20)) \(pad("ENDED", 20)) VALUE  OWNER / ERROR"
            )
            for step in run.steps {
                let value = step.value.map { "\($0.count) B" } ?? "-"
                print(
                    "\(pad(step.id, 16)) \(pad(step.state.rawValue, 9)) \(pad("\(step.attempts)", 3)) "
                        + "\(pad(step.started.map { stamp($0) } ?? "-", 20)) "
                        + "\(pad(step.ended.map { stamp($0) } ?? "-", 20)) \(pad(value, 6)) "
                        + "\(step.lastError ?? step.owner ?? "")")
            }
            print("graph:")
            for step in run.steps {
                print(step.after.isEmpty ? "  \(step.id)" : "  \(step.after.joined(separator: ", ")) -> \(step.id)")
            }
        }
    case "cancel":
        let id = try one(arguments, "run id")
        try await store.cancel(runID: id)
        print("cancelled \(id)")
    case "retry":
        let id = try one(arguments, "run id")
        try await store.retry(runID: id)
        print("retrying \(id)")
    case "prune":
        guard let text = arguments.options["--ended-before"]?.last else {
            throw Failure.usage("durable prune needs --ended-before AGE (7d)")
        }
        let count = try await store.prune(endedBefore: Date().addingTimeInterval(-(try age(text))))
        print("pruned \(count) run(s)")
    case "serve":
        guard arguments.positional.isEmpty else { throw Failure.usage("durable serve takes no argument") }
        let portText = arguments.options["--port"]?.last ?? "8080"
        guard let port = Int(portText), (0...65_535).contains(port) else {
            throw Failure.usage("--port \(portText) is not a port (0 to 65535)")
        }
        let host = arguments.options["--host"]?.last ?? "127.0.0.1"
        let token = arguments.options["--token"]?.last ?? ProcessInfo.processInfo.environment["DURABLE_TOKEN"]
        let server: DurableInspector.Server
        do {
            server = try DurableInspector(store: store, token: token).serve(host: host, port: port)
        } catch let error as DurableError {
            throw Failure.usage("\(error)")
        }
        print("serving the inspector at \(server.url)")
        fflush(nil)
        while true { try await Task.sleep(nanoseconds: 3_600_000_000_000) }
    case "watch":
        guard arguments.positional.count <= 1 else { throw Failure.usage("durable watch takes at most one run id") }
        var filter = DurableRunFilter()
        filter.workflow = arguments.options["--workflow"]?.last
        if let tags = arguments.options["--tag"] { filter.tags = Set(tags) }
        try await watch(
            store, run: arguments.positional.first, filter: filter, asJSON: arguments.flags.contains("--json"))
    default:
        throw Failure.usage("unknown command '\(arguments.command)' (durable help)")
    }
    return Status.ok
}

/// Prints the changes of the runs as they happen (from `store.changes`), or, for `run`, its state and each
/// step's, then each change of them (woken by the run's changes, and every second); returns once `run` ended.
func watch(_ store: DurableStore, run: String?, filter: DurableRunFilter, asJSON: Bool) async throws {
    guard let run else {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        for await change in store.changes(filter) {
            if asJSON {
                print(String(decoding: try encoder.encode(change), as: UTF8.self))
            } else {
                var line = "\(stamp(change.time)) \(change.kind.rawValue) \(change.run)"
                if let step = change.step { line += "/\(step)" }
                if let attempt = change.attempt { line += " #\(attempt)" }
                if let state = change.state { line += " \(state.rawValue)" }
                if let error = change.error { line += " (\(error))" }
                print(line)
            }
            fflush(nil)
        }
        return
    }
    // Woken by the run's changes, and every second (a change made before the other processes knew of
    // this watch is not published).
    let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    let changes = store.changes()
    let listening = Task {
        for await change in changes where change.run == run { wake.yield() }
    }
    let ticking = Task {
        while !Task.isCancelled {
            wake.yield()
            try? await Task.sleep(nanoseconds: 1_000_000_000)
        }
    }
    defer {
        listening.cancel()
        ticking.cancel()
    }
    var seen: [String: String] = [:]
    for await _ in wakes {
        guard let record = try await store.runs(.run(run)).first else {
            throw Failure(status: Status.notFound, message: "no run '\(run)' in the store")
        }
        var lines: [(String, String)] = [(record.id, record.state.rawValue)]
        for step in record.steps {
            var state = step.state.rawValue + " #\(step.attempts)"
            if let error = step.lastError, step.state != .completed { state += " (\(error))" }
            lines.append(("\(record.id)/\(step.id)", state))
        }
        for (key, state) in lines where seen[key] != state {
            seen[key] = state
            print("\(stamp(Date())) \(key) \(state)")
        }
        fflush(nil)
        if record.state.isEnded { return }
    }
}

do {
    let arguments = try CommandLineArguments(
        Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
    exit(try await run(arguments))
} catch let failure as Failure {
    FileHandle.standardError.write(Data("durable: \(failure.message)\n".utf8))
    exit(failure.status)
} catch let error as DurableError {
    FileHandle.standardError.write(Data("durable: \(error)\n".utf8))
    switch error {
    case .unknownRun: exit(Status.notFound)
    case .notRetryable: exit(Status.state)
    default: exit(Status.store)
    }
} catch {
    FileHandle.standardError.write(Data("durable: \(error)\n".utf8))
    exit(Status.store)
}
