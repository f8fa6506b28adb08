import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

private struct Boom: Error {}

/// Keeps the entries of the commands whose names start with `prefix` (other suites run commands in
/// parallel, and the logger is process-wide).
private final class Recording: CommandLogger {
    let prefix: String
    let entries = Locked<[CommandLogEntry]>([])

    init(prefix: String) { self.prefix = prefix }

    func log(_ entry: CommandLogEntry) {
        if entry.command.hasPrefix(prefix) { entries.withLock { $0.append(entry) } }
    }

    var lines: [String] { entries.withLock { $0.map { "\($0.level) \($0.command): \($0.message)" } } }
}

private func named(_ name: String, _ body: @escaping @Sendable (CommandResult<Int>) -> Void) -> Command<Int> {
    let command = Command<Int> { result in
        body(result)
        return nil
    }
    command.name = name
    return command
}

/// `CommandLogging`: what a command's steps log, at which level, and the level filter. Serialized: the
/// logger is process-wide. ProcedureKit's logging tests are not ported (they test its own log
/// formatters and channels, which this library leaves to the logger you set).
@Suite(.serialized) struct LoggingTests {
    private func withLogger(
        _ level: CommandLogLevel, _ body: (Recording) async throws -> Void
    ) async throws {
        let recording = Recording(prefix: "log-\(UUID().uuidString.prefix(8))")
        CommandLogging.logger = recording
        CommandLogging.minimumLevel = level
        defer {
            CommandLogging.logger = nil
            CommandLogging.minimumLevel = .info
        }
        try await body(recording)
    }

    @Test func startAndEnd_atDebug() async throws {
        try await withLogger(.debug) { log in
            let command = named("\(log.prefix) ok") { $0.succeed(1) }
            let value = try await command.value
            #expect(value == 1)
            #expect(log.lines == ["debug \(log.prefix) ok: started", "debug \(log.prefix) ok: completed"])
        }
    }

    @Test func failure_atError_withTheError_cancel_atNotice() async throws {
        try await withLogger(.debug) { log in
            let failing = named("\(log.prefix) failing") { $0.fail(Boom()) }
            _ = await terminalState(of: failing, start: true)
            let failure = log.entries.withLock { $0.last }
            #expect(failure?.level == .error)
            #expect(failure?.error is Boom)
            #expect(failure?.message.hasPrefix("failed: ") == true)

            let cancelled = named("\(log.prefix) cancelled") { _ in }
            cancelled.cancel()
            let notice = log.entries.withLock { $0.last }
            #expect(notice?.level == .notice && notice?.command == "\(log.prefix) cancelled")
            #expect((notice?.error as? CommandError)?.code == .cancelled)
        }
    }

    @Test func theDefaultLevel_info_skipsStartsAndEnds_keepsCancelsFailuresAndDiagnostics() async throws {
        try await withLogger(.info) { log in
            let ok = named("\(log.prefix) ok") { $0.succeed(1) }
            _ = await terminalState(of: ok, start: true)
            let failing = named("\(log.prefix) failing") { $0.fail(Boom()) }
            _ = await terminalState(of: failing, start: true)
            // A diagnostic: a value sent after the end.
            let kept = Locked<CommandResult<Int>?>(nil)
            let late = named("\(log.prefix) late") { result in
                kept.withLock { $0 = result }
                result.complete()
            }
            _ = await terminalState(of: late, start: true)
            kept.withLock { $0 }?.send(1)
            let levels = log.entries.withLock { $0.map { "\($0.level) \($0.command)" } }
            #expect(levels == ["error \(log.prefix) failing", "warning \(log.prefix) late"])
        }
    }

    @Test func yourOwnEntries_goThroughTheSameLogger_builtOnlyWhenLogged() async throws {
        try await withLogger(.notice) { log in
            let built = Locked(0)
            CommandLogging.log(.debug, command: "\(log.prefix) mine", "\(built.withLock { $0 += 1 })")
            CommandLogging.log(.warning, command: "\(log.prefix) mine", "low disk")
            #expect(built.withLock { $0 } == 0, "a message below the level is not built")
            #expect(log.lines == ["warning \(log.prefix) mine: low disk"])
        }
    }

    @Test func noLogger_nothingIsLogged() async {
        let recording = Recording(prefix: "log-none")
        CommandLogging.logger = recording
        CommandLogging.logger = nil
        CommandLogging.minimumLevel = .trace
        defer { CommandLogging.minimumLevel = .info }
        let command = named("log-none command") { $0.fail(Boom()) }
        _ = await terminalState(of: command, start: true)
        #expect(recording.lines.isEmpty)
        #expect(CommandLogging.logger == nil)
        #expect(!CommandLogging.enabled(.error))
    }
}
