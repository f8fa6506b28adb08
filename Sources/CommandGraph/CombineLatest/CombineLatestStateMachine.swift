/// The rules of `combineLatest` (ReactiveCocoa's): emit the latest value of every input each time one
/// sends, once all have sent at least once; complete when all completed; fail on the first failure.
struct CombineLatestStateMachine<Element: Sendable>: NaryStateMachine {
    enum Action: Sendable {
        case none
        /// The latest value of every input, in input order.
        case emit([Element])
        case complete
        case fail(any Error)
        /// Input `index` was cancelled: the node ends cancelled.
        case cancelled(index: Int)
    }

    private enum State {
        case running(latest: [Element?], missing: Int, active: Int)
        case finished
    }

    private var state: State

    init(inputs: Int) {
        state = .running(latest: Array(repeating: nil, count: inputs), missing: inputs, active: inputs)
    }

    /// With no input there is nothing to wait for: complete at once.
    mutating func start() -> Action {
        guard case .running(_, _, let active) = state, active == 0 else { return .none }
        state = .finished
        return .complete
    }

    mutating func value(_ value: Element, at index: Int) -> Action {
        guard case .running(var latest, var missing, let active) = state else { return .none }
        if latest[index] == nil { missing -= 1 }
        latest[index] = value
        state = .running(latest: latest, missing: missing, active: active)
        // A completed input keeps supplying its last value.
        return missing == 0 ? .emit(latest.map { $0! }) : .none
    }

    mutating func completed(at index: Int) -> Action {
        guard case .running(let latest, let missing, let active) = state else { return .none }
        if active == 1 {
            state = .finished
            return .complete
        }
        state = .running(latest: latest, missing: missing, active: active - 1)
        return .none
    }

    mutating func failed(_ error: any Error) -> Action {
        guard case .running = state else { return .none }
        state = .finished
        return .fail(error)
    }

    mutating func cancelled(at index: Int) -> Action {
        guard case .running = state else { return .none }
        state = .finished
        return .cancelled(index: index)
    }
}
