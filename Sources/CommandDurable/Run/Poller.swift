import CommandCore
import Foundation

/// Looks at the store at once when poked, one look at a time (a poke during a look makes one more look after
/// it), and every `backstop` when nothing pokes it, until stopped: the store's one timer. A worker finds
/// ready steps with it, the enqueued runs their ends, a store the cancels other processes recorded, and
/// the store renews its leases (a look that ends once the renewal committed: an outage delays the next
/// renewal instead of piling renewals up). The store's change notifications poke it; the backstop covers what no
/// notification announces (a lease that expired) and a notification lost with a connection.
///
/// The look runs on whatever thread pokes it (a notification's global queue, a timer's, a step's end);
/// it must call `done` once, from any thread.
final class Poller: Sendable {
    private struct State {
        var look: (@Sendable (_ done: @escaping @Sendable () -> Void) -> Void)?
        var looking = false
        var again = false
        var timer: (any Cancelable)?
    }

    private let backstop: Duration
    // Guards the look (nil once stopped), the look's flags and the backstop's timer.
    private let state: Locked<State>

    init(backstop: Duration) {
        self.backstop = backstop
        state = Locked(State())
    }

    /// Looks with `look` from now on, first at once. (Set after the owner is made, so `look` can hold it
    /// weakly.)
    func start(_ look: @escaping @Sendable (_ done: @escaping @Sendable () -> Void) -> Void) {
        state.withLock { $0.look = look }
        poke()
    }

    /// Looks now, or once more after the look running.
    func poke() {
        let look = state.withLock { state -> (@Sendable (@escaping @Sendable () -> Void) -> Void)? in
            guard let look = state.look else { return nil }
            if state.looking {
                state.again = true
                return nil
            }
            state.looking = true
            return look
        }
        look? { [self] in lookEnded() }
    }

    /// No more looks (one running ends as it is); the timer is cancelled.
    func stop() {
        let timer = state.withLock { state -> (any Cancelable)? in
            state.look = nil
            defer { state.timer = nil }
            return state.timer
        }
        timer?.cancel()
    }

    private func lookEnded() {
        let again = state.withLock { state -> Bool in
            state.looking = false
            defer { state.again = false }
            return state.again
        }
        if again { return poke() }
        // The look runs off the scheduler's one queue, which every timer of the process shares: a look
        // (or a store released at its end, whose close waits for its thread) never holds the timers up.
        let token = DispatchScheduler.shared.schedule(after: backstop) { [weak self] in
            let poller = self
            DispatchQueue.global().async { poller?.poke() }
        }
        let (stale, previous) = state.withLock { state -> (Bool, (any Cancelable)?) in
            if state.look == nil { return (true, nil) }
            defer { state.timer = token }
            return (false, state.timer)
        }
        previous?.cancel()
        if stale { token.cancel() }
    }
}
