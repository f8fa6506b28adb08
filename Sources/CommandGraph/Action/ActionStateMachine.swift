/// The bookkeeping of a ``CommandAction``: which executions run, which wait, what a new one gets.
struct ActionStateMachine: Sendable {
    enum Decision: Sendable, Equatable {
        /// Run now.
        case start
        /// Refuse.
        case reject
        /// Wait for a turn (enqueue policy).
        case wait
        /// Cancel these running executions, then run now.
        case startCancelling([UInt64])
    }

    let policy: ExecutionPolicy
    private(set) var running: [UInt64] = []
    private(set) var waiting: [UInt64] = []
    private var nextID: UInt64 = 0

    init(policy: ExecutionPolicy) { self.policy = policy }

    var isExecuting: Bool { !running.isEmpty }

    /// Whether an execution now would run (or wait its turn) rather than be refused.
    func accepts(enabledByCondition: Bool) -> Bool {
        guard enabledByCondition else { return false }
        switch policy {
        case .reject: return running.isEmpty
        case .concurrent(let max): return running.count < max
        case .cancelPrevious, .enqueue: return true
        }
    }

    /// A new execution: its id and what happens to it.
    mutating func request(enabledByCondition: Bool) -> (id: UInt64, decision: Decision) {
        let id = nextID
        nextID += 1
        guard accepts(enabledByCondition: enabledByCondition) else { return (id, .reject) }
        switch policy {
        case .reject, .concurrent:
            running.append(id)
            return (id, .start)
        case .cancelPrevious:
            let previous = running
            running = [id]
            return (id, previous.isEmpty ? .start : .startCancelling(previous))
        case .enqueue:
            if running.isEmpty {
                running.append(id)
                return (id, .start)
            }
            waiting.append(id)
            return (id, .wait)
        }
    }

    /// Execution `id` ended (or was cancelled while waiting); returns the waiting one whose turn it is.
    mutating func ended(_ id: UInt64) -> UInt64? {
        if let index = waiting.firstIndex(of: id) {
            waiting.remove(at: index)
            return nil
        }
        guard let index = running.firstIndex(of: id) else { return nil }
        running.remove(at: index)
        guard policy == .enqueue, running.isEmpty, !waiting.isEmpty else { return nil }
        let next = waiting.removeFirst()
        running.append(next)
        return next
    }
}
