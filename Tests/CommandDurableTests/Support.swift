import CommandDurable
import CommandDurablePostgres
import CommandDurablePostgresTesting
import CommandTestSupport
import Foundation

/// A fresh folder for a test's store files, removed by `remove()`.
struct TemporaryFolder {
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "durable-tests-\(UUID().uuidString)", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func file(_ name: String = "work.sqlite") -> String { url.appendingPathComponent(name).path }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// How many times each step's command was made, by step id (across runs of a test).
final class RunCounter: Sendable {
    private let counts = Locked<[String: Int]>([:])
    func hit(_ step: String) { counts.withLock { $0[step, default: 0] += 1 } }
    func count(_ step: String) -> Int { counts.withLock { $0[step] ?? 0 } }
    var total: Int { counts.withLock { $0.values.reduce(0, +) } }
}

/// Counters and gates the test workflows read (workflows are types: their steps reach tests through
/// these, by run id).
enum Probe {
    static let counter = RunCounter()
    /// Commands that never end, by step id, until released.
    static let held = Locked<[String: CommandResult<Int>]>([:])
    /// Failures left, by step id.
    static let failuresLeft = Locked<[String: Int]>([:])

    /// A step that fails while `failuresLeft[input]` lasts ("flaky attempt <n>"), then sends its attempt.
    static func flaky(_ input: String, _ context: StepContext) -> Command<Int> {
        Command<Int> { result in
            counter.hit("\(input)/flaky")
            let fail = failuresLeft.withLock { left -> Bool in
                let remaining = left[input, default: 0]
                left[input] = remaining - 1
                return remaining > 0
            }
            if fail {
                result.fail(TestFailure(message: "flaky attempt \(context.attempt)"))
            } else {
                result.succeed(context.attempt)
            }
            return nil
        }
    }

    static func value(_ step: String, _ value: Int) -> Command<Int> {
        Command<Int> { result in
            counter.hit(step)
            DispatchQueue.global().async { result.succeed(value) }
            return nil
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// a, b in parallel, then "sum" of both: 2 + 3.
struct Sum: DurableWorkflow {
    static let name = "sum"
    struct Input: Codable, Sendable { var tag: String }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Int> {
        let a = flow.step("a") { _ in Probe.value("\(input.tag)/a", 2) }
        let b = flow.step("b") { _ in Probe.value("\(input.tag)/b", 3) }
        return flow.step("sum", after: a, b) { _, a, b in Probe.value("\(input.tag)/sum", a + b) }
    }
}

/// The stores every rule is checked against: an SQLite file, and a database on a throwaway PostgreSQL
/// server (started once per test process; without PostgreSQL's binaries those cases are skipped with a
/// printed note).
enum StoreKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case sqlite
    case postgres

    var description: String { rawValue }
}

/// Where a test's store lives, opened again and again as "the same store" (a file's path, or a fresh
/// database's URL).
struct StorePlace: Sendable {
    let kind: StoreKind
    /// The file's path or the database's URL.
    let location: String
    private let folder: TemporaryFolder?

    /// A fresh place of `kind`; nil when PostgreSQL is not installed here (a note is printed once).
    static func make(_ kind: StoreKind) async throws -> StorePlace? {
        switch kind {
        case .sqlite:
            let folder = TemporaryFolder()
            return StorePlace(kind: kind, location: folder.file(), folder: folder)
        case .postgres:
            guard let server = await SharedPostgres.server.value else {
                // CI has PostgreSQL: there a skipped case is a failure.
                if ProcessInfo.processInfo.environment["AWESOMECOMMAND_REQUIRE_POSTGRES"] != nil {
                    throw TestFailure(
                        message: "PostgreSQL is required here (AWESOMECOMMAND_REQUIRE_POSTGRES) and did not start")
                }
                return nil
            }
            return StorePlace(kind: kind, location: try await server.makeDatabase(), folder: nil)
        }
    }

    func open(durability: DurableDurability = .full, lease: Duration = .seconds(30)) async throws -> DurableStore {
        switch kind {
        case .sqlite: return try DurableStore(path: location, durability: durability, lease: lease)
        case .postgres: return try await DurableStore(postgres: location, durability: durability, lease: lease)
        }
    }

    func remove() { folder?.remove() }
}

/// One throwaway PostgreSQL server for the whole test process (stopped at its exit).
enum SharedPostgres {
    /// The server; nil when PostgreSQL is not installed, except where it is required
    /// (`AWESOMECOMMAND_REQUIRE_POSTGRES`, set by CI): there it throws.
    static func available() async throws -> ThrowawayPostgres? {
        if let server = await server.value { return server }
        if ProcessInfo.processInfo.environment["AWESOMECOMMAND_REQUIRE_POSTGRES"] != nil {
            throw TestFailure(
                message: "PostgreSQL is required here (AWESOMECOMMAND_REQUIRE_POSTGRES) and did not start")
        }
        return nil
    }

    static let server = Task<ThrowawayPostgres?, Never> {
        do {
            return try await ThrowawayPostgres.start()
        } catch let unavailable as ThrowawayPostgres.Unavailable {
            print(
                "note: the PostgreSQL cases of the durable tests are skipped: \(unavailable). Install "
                    + "PostgreSQL's server and run swift test again to run them.")
            return nil
        } catch {
            print("note: the PostgreSQL cases of the durable tests are skipped: the server did not start: \(error)")
            return nil
        }
    }
}

/// The message of the ``DurableError/storage(message:)`` that `body` throws; nil when it returns, or
/// throws anything else (described in `other`).
func storageMessage<T>(_ body: () async throws -> T) async -> (message: String?, other: String) {
    do {
        _ = try await body()
        return (nil, "it returned")
    } catch let error as DurableError {
        if case .storage(let message) = error { return (message, "") }
        return (nil, "\(error)")
    } catch {
        return (nil, "\(error)")
    }
}

/// A PostgreSQL server of the test's own (stopping or restarting it would cut the other tests'
/// connections) and a fresh database's URL; nil where PostgreSQL is not installed (see `SharedPostgres`).
func ownPostgres() async throws -> (server: ThrowawayPostgres, url: String)? {
    guard try await SharedPostgres.available() != nil else { return nil }
    let server = try await ThrowawayPostgres.start()
    return (server, try await server.makeDatabase())
}

/// A fresh place of `kind` and a store open on it with `workflows` registered; nil where PostgreSQL is not
/// installed (see `StorePlace.make`). `close()` closes the store and removes the place.
func freshStore(_ kind: StoreKind, _ workflows: any DurableWorkflow.Type...) async throws -> FreshStore? {
    guard let place = try await StorePlace.make(kind) else { return nil }
    let store = try await place.open()
    for workflow in workflows { try store.register(workflow) }
    return FreshStore(place: place, store: store)
}

struct FreshStore {
    let place: StorePlace
    let store: DurableStore

    func close() {
        store.close()
        place.remove()
    }
}
