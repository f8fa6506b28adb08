// CommandLogging -> swift-log: every entry of the library's process-wide log (commands started, ended,
// cancelled, failed; durable runs resumed, steps taken over, retrying, completions refused) as a record
// of a swift-log `Logger`. One file: copy it into your target, or depend on `DurableLogging`.
//
//     CommandLogging.logger = SwiftLogCommandLogger(Logger(label: "commands"))
//     CommandLogging.minimumLevel = .info
import CommandCore
import Logging

/// Sends each ``CommandLogEntry`` to a swift-log `Logger`: the level mapped one to one (`trace`, `debug`,
/// `info`, `notice`, `warning`, `error`), the message as the record's message, the command's name as the
/// metadata `command` and the error (for a failure or a cancel) as `error`. Called on the thread where
/// the entry was made (see `CommandLogger`); swift-log's handlers are thread-safe.
public struct SwiftLogCommandLogger: CommandLogger {
    public let logger: Logger

    public init(_ logger: Logger) { self.logger = logger }

    public func log(_ entry: CommandLogEntry) {
        var metadata: Logger.Metadata = ["command": .string(entry.command)]
        if let error = entry.error { metadata["error"] = .string(String(describing: error)) }
        logger.log(level: Self.level(entry.level), "\(entry.message)", metadata: metadata)
    }

    static func level(_ level: CommandLogLevel) -> Logger.Level {
        switch level {
        case .trace: return .trace
        case .debug: return .debug
        case .info: return .info
        case .notice: return .notice
        case .warning: return .warning
        case .error: return .error
        }
    }
}
