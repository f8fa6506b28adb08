/// The rules of `flatMap` (ReactiveCocoa's): each source value starts an inner command, at most
/// `maxConcurrent` at once (later values wait in order, never dropped); complete when the source and
/// every inner completed; any failure fails the node and cancels everything.
struct FlatMapStateMachine<Element: Sendable>: Sendable {
    enum Action: Sendable {
        case none
        /// Start an inner command for this value.
        case start(Element)
        case complete
        case fail(any Error)
        case cancelled
    }

    private enum State {
        case running(sourceDone: Bool, active: Int, waiting: [Element])
        case finished
    }

    let maxConcurrent: Int
    private var state = State.running(sourceDone: false, active: 0, waiting: [])

    init(maxConcurrent: Int) {
        precondition(maxConcurrent > 0, "FlatMapStateMachine: maxConcurrent must be positive")
        self.maxConcurrent = maxConcurrent
    }

    mutating func value(_ value: Element) -> Action {
        guard case .running(let sourceDone, let active, var waiting) = state else { return .none }
        if active < maxConcurrent {
            state = .running(sourceDone: sourceDone, active: active + 1, waiting: waiting)
            return .start(value)
        }
        state = .finished
        waiting.append(value)
        state = .running(sourceDone: sourceDone, active: active, waiting: waiting)
        return .none
    }

    /// The transform returned no command for a started value: it counts as an inner that completed.
    mutating func innerCompleted() -> Action {
        guard case .running(let sourceDone, let active, var waiting) = state else { return .none }
        if !waiting.isEmpty {
            state = .finished
            let next = waiting.removeFirst()
            state = .running(sourceDone: sourceDone, active: active, waiting: waiting)
            return .start(next)
        }
        if sourceDone && active == 1 {
            state = .finished
            return .complete
        }
        state = .running(sourceDone: sourceDone, active: active - 1, waiting: waiting)
        return .none
    }

    mutating func sourceCompleted() -> Action {
        guard case .running(_, let active, let waiting) = state else { return .none }
        if active == 0 && waiting.isEmpty {
            state = .finished
            return .complete
        }
        state = .running(sourceDone: true, active: active, waiting: waiting)
        return .none
    }

    mutating func failed(_ error: any Error) -> Action {
        guard case .running = state else { return .none }
        state = .finished
        return .fail(error)
    }

    mutating func cancelled() -> Action {
        guard case .running = state else { return .none }
        state = .finished
        return .cancelled
    }
}
