/// The rules of `zip`: pair the oldest unpaired value of every input (FIFO); complete as soon as an
/// input has completed and its buffer is empty (checked after each pairing too); fail on the first
/// failure. Buffers are unbounded: a fast input's values wait for the slow ones, never dropped.
struct ZipStateMachine<Element: Sendable>: NaryStateMachine {
    enum Action: Sendable {
        case none
        /// Pairs to emit, in order, then (if `complete`) completion.
        case emit([[Element]], complete: Bool)
        case complete
        case fail(any Error)
        case cancelled(index: Int)
    }

    private enum State {
        case running(buffers: [Buffer], completed: [Bool])
        case finished
    }

    /// A FIFO with amortised O(1) pops.
    struct Buffer: Sendable {
        private var items: [Element] = []
        private var head = 0
        var isEmpty: Bool { head == items.count }
        var count: Int { items.count - head }
        mutating func push(_ item: Element) { items.append(item) }
        mutating func pop() -> Element {
            defer {
                head += 1
                if head == items.count {
                    items.removeAll(keepingCapacity: true)
                    head = 0
                }
            }
            return items[head]
        }
    }

    private var state: State

    init(inputs: Int) {
        state = .running(
            buffers: Array(repeating: Buffer(), count: inputs), completed: Array(repeating: false, count: inputs))
    }

    mutating func start() -> Action {
        guard case .running(let buffers, _) = state, buffers.isEmpty else { return .none }
        state = .finished
        return .complete
    }

    mutating func value(_ value: Element, at index: Int) -> Action {
        guard case .running(var buffers, let completed) = state else { return .none }
        state = .finished  // avoid a copy of the buffers while mutating them
        buffers[index].push(value)
        var pairs: [[Element]] = []
        while buffers.allSatisfy({ !$0.isEmpty }) {
            var pair: [Element] = []
            pair.reserveCapacity(buffers.count)
            for slot in buffers.indices { pair.append(buffers[slot].pop()) }
            pairs.append(pair)
        }
        let done = Self.isDone(buffers, completed)
        state = done ? .finished : .running(buffers: buffers, completed: completed)
        if pairs.isEmpty { return done ? .complete : .none }
        return .emit(pairs, complete: done)
    }

    mutating func completed(at index: Int) -> Action {
        guard case .running(let buffers, var completed) = state else { return .none }
        completed[index] = true
        if Self.isDone(buffers, completed) {
            state = .finished
            return .complete
        }
        state = .running(buffers: buffers, completed: completed)
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

    private static func isDone(_ buffers: [Buffer], _ completed: [Bool]) -> Bool {
        zip(buffers, completed).contains { $0.isEmpty && $1 }
    }
}
