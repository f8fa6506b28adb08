import Foundation

/// The process-wide command counters: how many commands were created (their creation order) and how
/// many are alive. Touched once in each command's init and deinit (`CommandNode`), under the library's own lock
/// (`Synchronization.Atomic` needs macOS 15 / iOS 18).
enum CommandCounters {
    private struct Counts {
        var created: UInt64 = 0
        var live = 0
    }
    private static let counts = Locked(Counts())

    /// A new command: its creation order.
    static func created() -> UInt64 {
        counts.withLock { counts in
            counts.live += 1
            defer { counts.created &+= 1 }
            return counts.created
        }
    }

    static func released() { counts.withLock { $0.live -= 1 } }

    static var live: Int { counts.withLock { $0.live } }
}
