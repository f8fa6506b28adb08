/// The state of `concat`: which input is active.
struct SequenceStateMachine: Sendable {
    enum Action: Sendable, Equatable {
        case none
        case pass
        /// The active input completed: subscribe to input `index`.
        case start(index: Int)
        case complete
        case fail
        case cancelled(index: Int)
    }

    private enum State {
        case running(active: Int)
        case finished
    }

    let count: Int
    private var state = State.running(active: 0)

    init(count: Int) {
        self.count = count
        if count == 0 { state = .finished }
    }

    var completesAtOnce: Bool { count == 0 }

    func value(at index: Int) -> Action {
        guard case .running(let active) = state, active == index else { return .none }
        return .pass
    }

    mutating func completed(at index: Int) -> Action {
        guard case .running(let active) = state, active == index else { return .none }
        if index == count - 1 {
            state = .finished
            return .complete
        }
        state = .running(active: index + 1)
        return .start(index: index + 1)
    }

    mutating func failed(at index: Int) -> Action {
        guard case .running(let active) = state, active == index else { return .none }
        state = .finished
        return .fail
    }

    /// The active input was cancelled: the node ends cancelled.
    mutating func cancelled(at index: Int) -> Action {
        guard case .running(let active) = state, active == index else { return .none }
        state = .finished
        return .cancelled(index: index)
    }
}
