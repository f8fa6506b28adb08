import Foundation

/// A misuse the library tolerated without crashing: an event sent after the terminal one, a dependency
/// removed after execute, a second `start()`.
public struct CommandDiagnostic: Sendable, CustomStringConvertible {
    /// The command concerned, by identity.
    public let commandID: ObjectIdentifier
    /// Its name (its `name`, else its type).
    public let command: String
    /// What happened, named like a ``CommandError/Code``.
    public let code: CommandError.Code
    /// A sentence that says what was ignored and what to do.
    public let message: String

    public var description: String { "AwesomeCommand diagnostic [\(code)] \(command): \(message)" }
}

/// Where diagnostics go.
///
/// By default, debug builds print the first 20 of a process to standard error and release builds
/// print nothing. Observers added with ``observe(_:)`` receive every diagnostic, synchronously, on the
/// thread that caused it; keep them short and thread-safe.
public enum CommandDiagnostics {
    private struct State {
        var observers: [UInt64: @Sendable (CommandDiagnostic) -> Void] = [:]
        var nextID: UInt64 = 0
        var printed = 0
    }

    // Guards the observer table and the printed count.
    private static let state = Locked(State())

    /// Calls `observer` with every diagnostic until the returned token is cancelled.
    public static func observe(_ observer: @escaping @Sendable (CommandDiagnostic) -> Void) -> any Cancelable {
        let id = state.withLock { state -> UInt64 in
            defer { state.nextID += 1 }
            state.observers[state.nextID] = observer
            return state.nextID
        }
        return BlockCancelable { _ = state.withLock { $0.observers.removeValue(forKey: id) } }
    }

    /// The number of commands alive in this process (created and not yet deinitialised): a leak
    /// check for tools and benchmarks. After a graph ran and its last reference was dropped, this
    /// returns to its value from before the graph was built, once the thread releasing the graph is
    /// done (a million-command graph takes a moment). Tests running in parallel share the count.
    public static var liveCommands: Int { CommandCounters.live }

    static func report(_ diagnostic: CommandDiagnostic) {
        let (observers, shouldPrint) = state.withLock { state in
            var shouldPrint = false
            #if DEBUG
                if state.printed < 20 {
                    state.printed += 1
                    shouldPrint = true
                }
            #endif
            return (Array(state.observers.values), shouldPrint)
        }
        if shouldPrint {
            FileHandle.standardError.write(Data((diagnostic.description + "\n").utf8))
        }
        for observer in observers { observer(diagnostic) }
        CommandLogging.log(.warning, command: diagnostic.command, diagnostic.message)
    }
}
