import CommandCore

/// Waits, without blocking a thread, for the first terminal state of `command` (starting it first
/// when `start` is true).
public func terminalState<Output>(of command: Command<Output>, start: Bool = false) async -> CommandState {
    await withCheckedContinuation { continuation in
        let once = OnceToken()
        command.observeState(on: .immediate) { state in
            guard state.isTerminal, once.take() else { return }
            continuation.resume(returning: state)
        }
        if start { command.start() }
    }
}

/// Waits, without blocking a thread, for the first state change `command` reports (its run began,
/// or it ended first).
public func becameExecuting<Output>(_ command: Command<Output>) async {
    await withCheckedContinuation { continuation in
        let once = Locked(false)
        command.observeState(on: .immediate) { state in
            guard
                once.withLock({ done in
                    defer { done = true }; return !done
                })
            else { return }
            continuation.resume()
        }
    }
}
