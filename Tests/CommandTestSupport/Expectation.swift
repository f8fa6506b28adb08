import CommandCore
import Dispatch

/// Resumes waiters once `fulfill()` was called `count` times. `wait` never blocks a thread: it
/// suspends on a continuation, resumed by the last `fulfill()` or by the bound (a generous one; a
/// test that reaches it has failed, it does not pace the test).
public final class Checkpoint: Sendable {
    private struct State {
        var remaining: Int
        var waiters: [CheckedContinuation<Bool, Never>] = []
    }

    // Guards the count and the waiting continuations.
    private let state: Locked<State>

    public init(count: Int = 1) { state = Locked(State(remaining: count)) }

    public func fulfill() {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.remaining -= 1
            guard state.remaining == 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }

    public var isFulfilled: Bool { state.withLock { $0.remaining <= 0 } }

    /// True when fulfilled, false when `seconds` passed first.
    public func wait(seconds: Double = 60) async -> Bool {
        let token = OnceToken()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let done = state.withLock { state -> Bool in
                if state.remaining <= 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if done {
                continuation.resume(returning: true)
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
                // Remove and resume this waiter if it is still here (the bound was reached).
                let timedOut = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
                    guard state.remaining > 0, token.take() else { return [] }
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in timedOut { waiter.resume(returning: false) }
            }
        }
    }
}

/// True for the first caller of `take()` only.
public final class OnceToken: Sendable {
    private let taken = Locked(false)
    public init() {}

    public func take() -> Bool {
        taken.withLock { taken in
            defer { taken = true }
            return !taken
        }
    }
}
