internal import CommandAtomics
import Dispatch

/// When a command went through its life, on a monotonic clock (nanoseconds since boot, the clock of
/// `DispatchTime`), and on which threads: what graph pictures, traces and stall reports are made of.
///
/// Recorded by the command itself at each transition (a clock read each, about 25 ns); read it at any
/// time, from any thread: a stage not reached yet is nil.
public struct CommandTiming: Sendable, Equatable {
    // Stored without `Optional` (0 is "not reached": the clock counts from boot, and no thread number
    // is 0): 36 bytes instead of 73 in every command's state (the state puts a 4-byte field in the
    // last 4 of the 40 its alignment rounds this to).
    private var executed: UInt64 = 0
    private var ready: UInt64 = 0
    private var started: UInt64 = 0
    private var ended: UInt64 = 0
    private var runThread: UInt32 = 0

    /// Executed (its dependencies were being waited for from then on).
    public internal(set) var executedAt: UInt64? {
        get { Self.optional(executed) }
        set { executed = newValue ?? 0 }
    }
    /// Handed to its queue: every dependency had finished.
    public internal(set) var readyAt: UInt64? {
        get { Self.optional(ready) }
        set { ready = newValue ?? 0 }
    }
    /// `run` was called.
    public internal(set) var startedAt: UInt64? {
        get { Self.optional(started) }
        set { started = newValue ?? 0 }
    }
    /// The terminal event was decided.
    public internal(set) var endedAt: UInt64? {
        get { Self.optional(ended) }
        set { ended = newValue ?? 0 }
    }
    /// A number naming the thread `run` was called on, for traces: equal for two commands that ran on
    /// the same thread, different otherwise (given out in the order threads first ran a command; not
    /// a `pthread_t`, and not reused when a thread exits).
    public internal(set) var threadID: UInt64? {
        get { runThread == 0 ? nil : UInt64(runThread) }
        set { runThread = newValue.map { UInt32(truncatingIfNeeded: $0) } ?? 0 }
    }

    private static func optional(_ stored: UInt64) -> UInt64? { stored == 0 ? nil : stored }

    /// No time recorded (a command not executed yet; a plain operation in a report).
    package init() {}

    /// How long `run` took to end, once it has.
    public var runDuration: Duration? {
        guard let startedAt, let endedAt, endedAt >= startedAt else { return nil }
        return .nanoseconds(Int64(endedAt - startedAt))
    }

    static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    static var currentThread: UInt64 { UInt64(command_thread_number()) }
}
