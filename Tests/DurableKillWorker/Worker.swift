import CommandDurable
import Dispatch
import Foundation

/// The worker's arguments and its outside log.
enum Worker {
    static let arguments = CommandLine.arguments
    static var logPath: String { arguments[2] }
    static var seed: UInt64 { arguments.count > 3 ? UInt64(arguments[3]) ?? 1 : 1 }
    /// The store's lease in milliseconds (argv[4]; 30 s by default).
    static var leaseMilliseconds: Int64 { arguments.count > 4 ? Int64(arguments[4]) ?? 30_000 : 30_000 }
    /// How many runs to make, one after the other (argv[5]; 1 by default): "kill-0", "kill-1", ...
    static var runs: Int { arguments.count > 5 ? Int(arguments[5]) ?? 1 : 1 }
    /// Each step's work in milliseconds (argv[6]; 5-30, by step, by default).
    static var stepMilliseconds: Int? { arguments.count > 6 ? Int(arguments[6]) : nil }
    static let pid = ProcessInfo.processInfo.processIdentifier
    /// The step (environment `DURABLE_STOP_AT`) whose first attempt stops this process with `SIGSTOP` once
    /// its start is logged: a stall at a known point, whatever the machine's load (a test's `SIGSTOP`
    /// sent on seeing the log line could land after the whole run had ended).
    static let stopAt = ProcessInfo.processInfo.environment["DURABLE_STOP_AT"]
    /// The results of steps that end only when cancelled.
    static let held = Locked<[CommandResult<Int>]>([])

    /// The store at argv[1]: a PostgreSQL URL, or a file's path.
    static func openStore() async throws -> DurableStore {
        let place = arguments[1]
        if place.hasPrefix("postgres") {
            return try await DurableStore(postgres: place, durability: .normal, lease: .milliseconds(leaseMilliseconds))
        }
        return try DurableStore(path: place, durability: .normal, lease: .milliseconds(leaseMilliseconds))
    }

    /// Appends `line` to the outside log and flushes it to the disk.
    static func append(_ line: String) {
        let descriptor = open(logPath, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { return }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        _ = fsync(descriptor)
        close(descriptor)
    }

    /// A step's command: logs its start, works a few milliseconds (without blocking a thread), logs its
    /// end.
    static func work(_ context: StepContext, _ value: Int) -> Command<Int> {
        Command<Int> { result in
            append("start \(context.runID)/\(context.stepID) \(context.attempt) \(pid)")
            if context.stepID == stopAt && context.attempt == 1 { _ = raise(SIGSTOP) }
            var hash = seed
            for byte in context.stepID.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
            let milliseconds = stepMilliseconds ?? 5 + Int(hash % 25)
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) {
                append("end \(context.runID)/\(context.stepID) \(context.attempt) \(pid)")
                result.succeed(value)
            }
            return nil
        }
    }
}

/// A chain of 10 (each adds 1 to the one before), a fan-out of 10 after it (each adds its index), and a
/// fan-in of the 10: 21 steps; with input 1 the value is 10 * 10 + (0 + ... + 9) = 145.
struct KillTest: DurableWorkflow {
    static let name = "kill-test"

    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
        var previous = flow.step("c0") { context in Worker.work(context, input) }
        for index in 1..<10 {
            previous = flow.step("c\(index)", after: previous) { context, value in Worker.work(context, value + 1) }
        }
        let chain = previous
        let fan = (0..<10).map { index in
            flow.step("f\(index)", after: chain) { context, value in Worker.work(context, value + index) }
        }
        return flow.step(
            "total", after: fan[0], fan[1], fan[2], fan[3], fan[4], fan[5], fan[6], fan[7], fan[8], fan[9]
        ) { context, a, b, c, d, e, f, g, h, i, j in
            Worker.work(context, a + b + c + d + e + f + g + h + i + j)
        }
    }
}

/// One step, a fan-out of 4 after it (each adds its index), a fan-in of the 4: with input n the value is
/// 4n + 6.
struct FanFour: DurableWorkflow {
    static let name = "fan-four"

    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
        let first = flow.step("first") { context in Worker.work(context, input) }
        let fan = (0..<4).map { index in
            flow.step("f\(index)", after: first) { context, value in Worker.work(context, value + index) }
        }
        return flow.step("total", after: fan[0], fan[1], fan[2], fan[3]) { context, a, b, c, d in
            Worker.work(context, a + b + c + d)
        }
    }
}

/// One step that never ends until cancelled: logs "start" when it begins, "cancelled" when its cancel
/// arrives.
struct Hang: DurableWorkflow {
    static let name = "hang"

    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
        flow.step("hang") { context in
            Command<Int> { result in
                Worker.append("start \(context.runID)/\(context.stepID) \(context.attempt) \(Worker.pid)")
                Worker.held.withLock { $0.append(result) }  // kept: the step ends only when cancelled
                return BlockCancelable {
                    Worker.append("cancelled \(context.runID)/\(context.stepID) \(context.attempt) \(Worker.pid)")
                }
            }
        }
    }
}

/// One step that sends its input at once: the heartbeat's runs.
struct Quick: DurableWorkflow {
    static let name = "quick"

    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
        flow.step("quick") { _ in Command.just(input) }
    }
}

/// The sleeps of the test's `Nap` and `NapUntil` (same names, steps and values): started here, killed
/// during their sleeps, resumed by the test.
struct WorkerNap: DurableWorkflow {
    static let name = "nap"
    struct Input: Codable, Sendable {
        var tag: String
        var seconds: Double
    }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Int> {
        let before = flow.step("before") { _ in Command<Int>.just(1) }
        let nap = flow.sleep("nap", for: .milliseconds(Int(input.seconds * 1_000)), waitingFor: [before])
        return flow.step("after", waitingFor: [nap]) { _ in Command<Int>.just(7) }
    }
}

struct WorkerNapUntil: DurableWorkflow {
    static let name = "nap-until"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
        let nap = flow.sleep("nap", until: Date().addingTimeInterval(10))
        return flow.step("after", waitingFor: [nap]) { _ in Command<Int>.just(8) }
    }
}

/// The test's `Beat` (same name and step): a schedule's run, fired by worker processes.
struct WorkerBeat: DurableWorkflow {
    static let name = "beat"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<String> {
        flow.step("beat") { context in Command<String>.just(context.runID) }
    }
}

extension DurableQueue {
    /// Two at once, one per key.
    static let limited = DurableQueue("limited", concurrency: 2, perKey: 1)
    /// Five starts a second.
    static let rated = DurableQueue("rated", concurrency: 10, rate: DurableRate(5, per: .seconds(1)))
}

/// The test's `Queued` (same name, step and queues): one step on a queue that logs its interval
/// ("qstart <run> <key> <time>" and "qend ...") to the outside log, working `ms` milliseconds.
struct WorkerQueued: DurableWorkflow {
    static let name = "queued"
    struct Input: Codable, Sendable {
        var key: String
        var ms: Int
        var rated = false
    }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Int> {
        flow.step("work", queue: input.rated ? .rated : .limited, key: input.key) { context in
            Command<Int> { result in
                Worker.append("qstart \(context.runID) \(input.key) \(Date().timeIntervalSince1970)")
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(input.ms)) {
                    Worker.append("qend \(context.runID) \(input.key) \(Date().timeIntervalSince1970)")
                    result.succeed(1)
                }
                return nil
            }
        }
    }
}

/// The test's `Approval` (same name, steps and values): a wait for an event, cut by a kill.
struct WorkerApproval: DurableWorkflow {
    static let name = "approval"
    struct Input: Codable, Sendable {
        var tag: String
        var timeout: Double?
        var holdAfter = false
    }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<String> {
        let approval = flow.event(
            "approval", of: String.self, timeout: input.timeout.map { .milliseconds(Int($0 * 1_000)) })
        return flow.step("answer", after: approval) { _, approval -> Command<String> in
            Command<String>.just(approval.map { "got \($0)" } ?? "none")
        }
    }
}

/// The test's `NapParent` (same name, steps and values): a child run that sleeps, cut by a kill.
struct WorkerNapParent: DurableWorkflow {
    static let name = "nap-parent"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
        let kid = flow.child("kid", WorkerNap.self) { _ in WorkerNap.Input(tag: input, seconds: 2) }
        return flow.step("done", after: kid) { _, kid in Command<Int>.just(kid + 1) }
    }
}

/// Prints each entry of the library's log (`DURABLE_LOG_ENTRIES=1`).
struct PrintedLog: CommandLogger {
    func log(_ entry: CommandLogEntry) {
        print("log \(entry)")
        fflush(nil)
    }
}
