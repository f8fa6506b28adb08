internal import CommandAtomics
import Foundation

/// How much a log entry matters, lowest first (swift-log's levels, without `critical`).
public enum CommandLogLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    /// Finer than debug: reserved for your own entries.
    case trace
    /// A command started or ended (completed).
    case debug
    /// Reserved for your own entries.
    case info
    /// A command was cancelled (by `cancel()`, its token, a failed dependency, a false condition).
    case notice
    /// A diagnostic: a misuse the library noticed and survived (a late dependency, a send after
    /// completion...), the same report ``CommandDiagnostics`` observers get.
    case warning
    /// A command failed.
    case error

    public static func < (lhs: CommandLogLevel, rhs: CommandLogLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .trace: return "trace"
        case .debug: return "debug"
        case .info: return "info"
        case .notice: return "notice"
        case .warning: return "warning"
        case .error: return "error"
        }
    }
}

/// One thing a command did, as the library reports it to a ``CommandLogger``.
public struct CommandLogEntry: Sendable, CustomStringConvertible {
    /// How much it matters.
    public let level: CommandLogLevel
    /// The command's name (its `name`, else its type).
    public let command: String
    /// What happened, in a sentence ("started", "completed", "cancelled: ...", "failed: ...").
    public let message: String
    /// The error, for a failure or a cancel.
    public let error: (any Error)?
    /// When it happened.
    public let date: Date

    public init(
        level: CommandLogLevel, command: String, message: String, error: (any Error)? = nil, date: Date = Date()
    ) {
        self.level = level
        self.command = command
        self.message = message
        self.error = error
        self.date = date
    }

    public var description: String { "[\(level)] \(command): \(message)" }
}

/// Where a process's command log goes: set one with ``CommandLogging/logger``.
///
/// `log(_:)` is called synchronously, on the thread where the step happened (a command's own queue
/// for its start and its end, the canceller's thread for a cancel), possibly on several threads at
/// once: keep it short and thread-safe, and hand the entry to your logging system (os.Logger,
/// swift-log; the "Logging" article shows both).
public protocol CommandLogger: Sendable {
    func log(_ entry: CommandLogEntry)
}

/// The process-wide log of what commands do, **off by default**: a command's start and end at
/// ``CommandLogLevel/debug``, a cancel at ``CommandLogLevel/notice``, a diagnostic at
/// ``CommandLogLevel/warning``, a failure at ``CommandLogLevel/error`` with its error.
///
/// ```swift
/// CommandLogging.logger = PrintLogger()     // any CommandLogger
/// CommandLogging.minimumLevel = .debug      // default .info: cancels, diagnostics and failures
/// ```
///
/// With no logger set, a command pays one atomic load and a branch at its start and at its end.
/// Entries below ``minimumLevel`` are not built. Setting either property takes effect for the
/// steps that happen after it returns (a step under way on another thread may still use the old one).
public enum CommandLogging {
    private struct State {
        var logger: (any CommandLogger)?
        var minimumLevel = CommandLogLevel.info
    }

    // Guards the logger and the level; the atomic threshold in `CommandAtomics` mirrors them (the
    // lowest level logged, or Int32.max without a logger) for the one-load check on the hot path.
    private static let state = Locked(State())

    /// The logger, or nil (the default: nothing is logged).
    public static var logger: (any CommandLogger)? {
        get { state.withLock { $0.logger } }
        set { update { $0.logger = newValue } }
    }

    /// The lowest level logged; default ``CommandLogLevel/info``.
    public static var minimumLevel: CommandLogLevel {
        get { state.withLock { $0.minimumLevel } }
        set { update { $0.minimumLevel = newValue } }
    }

    private static func update(_ change: (inout State) -> Void) {
        state.withLock { state in
            change(&state)
            command_atomics_store_log_threshold(state.logger == nil ? Int32.max : Int32(state.minimumLevel.rawValue))
        }
    }

    /// Whether an entry of `level` would be logged: the one load of the hot path.
    @inline(__always)
    static func enabled(_ level: CommandLogLevel) -> Bool {
        Int(command_atomics_load_log_threshold()) <= level.rawValue
    }

    /// Logs an entry of your own through the same logger (nothing if none is set or `level` is below
    /// ``minimumLevel``); `message` is only built if it is logged.
    public static func log(
        _ level: CommandLogLevel, command: String, _ message: @autoclosure () -> String, error: (any Error)? = nil
    ) {
        guard enabled(level), let logger = state.withLock({ $0.logger }) else { return }
        logger.log(CommandLogEntry(level: level, command: command, message: message(), error: error))
    }

    /// A command's start (`run` is about to be called).
    @inline(never)
    static func started(_ command: String) {
        log(.debug, command: command, "started")
    }

    /// Whether a logger is set at all (any level): the one load of a command's end.
    @inline(__always)
    static var isOn: Bool { command_atomics_load_log_threshold() != Int32.max }

    /// A command's end.
    @inline(never)
    static func ended(_ command: String, _ outcome: Termination) {
        switch outcome {
        case .completed: log(.debug, command: command, "completed")
        case .cancelled(let error): log(.notice, command: command, "cancelled: \(error.message)", error: error)
        case .failed(let error): log(.error, command: command, "failed: \(error)", error: error)
        }
    }
}
