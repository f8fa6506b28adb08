/// The rules of `merge` for its inputs' ends: complete when all inputs completed; fail on the first
/// failure; end cancelled when an input was cancelled. Values need no state: the node passes each one
/// straight on, in arrival order (its link drops what comes after the node ended).
struct MergeStateMachine: Sendable {
    enum Action: Sendable, Equatable {
        case none
        case complete
        case fail
        case cancelled(index: Int)
    }

    private enum State {
        case running(active: Int)
        case finished
    }

    private var state: State

    init(inputs: Int) { state = .running(active: inputs) }

    mutating func start() -> Action {
        guard case .running(0) = state else { return .none }
        state = .finished
        return .complete
    }

    mutating func completed() -> Action {
        guard case .running(let active) = state else { return .none }
        if active == 1 {
            state = .finished
            return .complete
        }
        state = .running(active: active - 1)
        return .none
    }

    mutating func failed() -> Action {
        guard case .running = state else { return .none }
        state = .finished
        return .fail
    }

    mutating func cancelled(at index: Int) -> Action {
        guard case .running = state else { return .none }
        state = .finished
        return .cancelled(index: index)
    }
}
