import CommandCore

extension Command {
    /// Starts a command for each value, cancelling the previous one (ReactiveCocoa's
    /// `switchToLatest` after a map).
    ///
    /// *Emits:* the values of the latest inner command only. *Completes:* when this command and the
    /// latest inner command completed. *Fails:* when this command or the latest inner fails, or
    /// `transform` throws. *Cancels:* the previous inner command when a new value arrives (unless
    /// another consumer needs it), and everything when the node is cancelled.
    public func flatMapLatest<Result: Sendable>(
        _ transform: @escaping @Sendable (Output) throws -> Command<Result>
    ) -> Command<Result> {
        return unary("flatMapLatest") { link, input in
            let state = Locked(LatestState())
            @Sendable func finishIfDone() {
                let done = state.withLock { state -> Bool in
                    guard state.sourceDone && !state.innerActive && !state.finished else { return false }
                    state.finished = true
                    return true
                }
                if done { link.emit(.completed) }
            }
            return { event in
                switch event {
                case .value(let value):
                    let inner: Command<Result>
                    do { inner = try transform(value) } catch { return link.emit(.failed(error)) }
                    let (generation, previous) = state.withLock { state in
                        state.generation += 1
                        state.innerActive = true
                        defer { state.current = nil }
                        return (state.generation, state.current)
                    }
                    previous?.cancel()
                    link.result.command.recordRunTimeInput(inner)
                    let subscription = inner.subscribe { event in
                        guard state.withLock({ $0.generation == generation && !$0.finished }) else { return }
                        switch event {
                        case .value(let value): link.emit(.value(value))
                        case .completed:
                            state.withLock { $0.innerActive = false }
                            finishIfDone()
                        case .failed, .cancelled:
                            state.withLock { $0.finished = true }
                            link.forwardTerminal(event, from: inner)
                        }
                    }
                    let stale = state.withLock { state -> Bool in
                        guard state.generation == generation else { return true }
                        state.current = subscription
                        return false
                    }
                    if stale { subscription.cancel() } else { link.add(subscription) }
                case .completed:
                    state.withLock { $0.sourceDone = true }
                    finishIfDone()
                case .failed, .cancelled:
                    state.withLock { $0.finished = true }
                    link.forwardTerminal(event, from: input)
                }
            }
        }
    }
}

/// The state of `flatMapLatest`: which inner command is current.
struct LatestState: Sendable {
    var generation = 0
    var current: (any Cancelable)?
    var innerActive = false
    var sourceDone = false
    var finished = false
}

extension Command where Output: Sendable {
    /// The values of the latest command this command sends (ReactiveCocoa's `switchToLatest`); see
    /// ``flatMapLatest(_:)``.
    public func switchToLatest<Inner: Sendable>() -> Command<Inner> where Output == Command<Inner> {
        flatMapLatest { $0 }
    }
}
