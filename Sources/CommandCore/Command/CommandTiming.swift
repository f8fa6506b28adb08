import Dispatch

/// When a command went through its life, on a monotonic clock (nanoseconds since boot, the clock of
/// `DispatchTime`), and on which threads: what graph pictures, traces and stall reports are made of.
///
/// Recorded by the command itself at each transition (a clock read each, about 25 ns); read it at any
/// time, from any thread: a stage not reached yet is nil.
public struct CommandTiming: Sendable, Equatable {
    /// Executed (its dependencies were being waited for from then on).
    public internal(set) var executedAt: UInt64?
    /// Handed to its queue: every dependency had finished.
    public internal(set) var readyAt: UInt64?
    /// `run` was called.
    public internal(set) var startedAt: UInt64?
    /// The terminal event was decided.
    public internal(set) var endedAt: UInt64?
    /// The thread `run` was called on (a `pthread_t`, for traces).
    public internal(set) var thread: UInt64?

    /// No time recorded (a command not executed yet; a plain operation in a report).
    package init() {}

    /// How long `run` took to end, once it has.
    public var runDuration: Duration? {
        guard let startedAt, let endedAt, endedAt >= startedAt else { return nil }
        return .nanoseconds(Int64(endedAt - startedAt))
    }

    static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    static var currentThread: UInt64 { Platform.currentThreadID }
}
