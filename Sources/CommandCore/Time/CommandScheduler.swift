import Dispatch
import Foundation

/// A clock and a timer for everything that waits: the time-based operators of `CommandGraph`
/// (`timeout`, `delay`, `retry` delays, `interval`, `throttle`) and ``TimeoutObserver``, so tests can
/// drive a ``VirtualScheduler`` instead of waiting in real time.
public protocol CommandScheduler: Sendable {
    /// Time elapsed since the scheduler's origin, monotonic.
    var now: Duration { get }
    /// Runs `action` once `delay` has passed (at once if it is not positive), on a thread of the
    /// scheduler's choosing. Cancelling the returned token before it ran prevents it.
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any Cancelable
}

/// Real time: timers on a serial `DispatchQueue` (so actions due at the same time run in the order
/// they were scheduled).
public struct DispatchScheduler: CommandScheduler {
    /// The default scheduler of the time-based operators.
    public static let shared = DispatchScheduler(queue: DispatchQueue(label: "AwesomeCommand.scheduler"))

    private let queue: DispatchQueue
    private let origin = DispatchTime.now()

    /// A scheduler whose actions run on `queue`.
    public init(queue: DispatchQueue) { self.queue = queue }

    public var now: Duration { .nanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - origin.uptimeNanoseconds)) }

    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any Cancelable {
        // Cancelling releases the action at once (and what it captured), not when the timer fires.
        let slot = Locked<(@Sendable () -> Void)?>(action)
        // Saturating: a delay beyond what nanoseconds in an `Int64` hold (292 years) waits that long.
        queue.asyncAfter(deadline: .now() + delay.dispatchInterval) {
            let action = slot.withLock { action -> (@Sendable () -> Void)? in
                defer { action = nil }
                return action
            }
            action?()
        }
        return BlockCancelable { slot.withLock { $0 = nil } }
    }
}

/// Virtual time for tests: nothing runs until ``advance(by:)`` moves the clock, which then runs every
/// action due, in deadline order (scheduling order for equal deadlines), on the calling thread.
public final class VirtualScheduler: CommandScheduler {
    private struct Entry {
        let deadline: Duration
        let order: Int
        let action: @Sendable () -> Void
        let token: BlockCancelable
    }

    private struct State {
        var now: Duration = .zero
        var entries: [Entry] = []
        var nextOrder = 0
    }

    // Guards the clock and the pending actions.
    private let state = Locked(State())

    public init() {}

    public var now: Duration { state.withLock { $0.now } }

    /// The number of actions waiting.
    public var pendingCount: Int { state.withLock { state in state.entries.filter { !$0.token.isCancelled }.count } }

    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any Cancelable {
        let token = BlockCancelable {}
        state.withLock { state in
            state.entries.append(
                Entry(deadline: state.now + max(.zero, delay), order: state.nextOrder, action: action, token: token))
            state.nextOrder += 1
        }
        return token
    }

    /// Moves the clock forward by `duration`, running what falls due (including what those actions
    /// schedule within the window).
    public func advance(by duration: Duration = .zero) {
        let target = state.withLock { $0.now } + duration
        while true {
            let next = state.withLock { state -> Entry? in
                guard
                    let index = state.entries.indices.min(by: {
                        (state.entries[$0].deadline, state.entries[$0].order) < (
                            state.entries[$1].deadline, state.entries[$1].order
                        )
                    }), state.entries[index].deadline <= target
                else {
                    state.now = target
                    return nil
                }
                let entry = state.entries.remove(at: index)
                state.now = max(state.now, entry.deadline)
                return entry
            }
            guard let next else { return }
            if !next.token.isCancelled { next.action() }
        }
    }
}
