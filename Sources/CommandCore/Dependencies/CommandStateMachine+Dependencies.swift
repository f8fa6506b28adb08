import Foundation

// The dependency half of the state machine: edges, the execute walk that claims and registers a
// command, and its dependencies' endings.
extension CommandStateMachine {
    // MARK: - Dependencies

    mutating func addDependency(
        _ operation: Operation, isSelf: Bool, typeName: @autoclosure () -> String
    ) -> AddDependencyAction {
        if hasDependency(operation) { return .duplicate }
        if isSelf {
            switch lifecycle {
            case .pending, .claimed:
                // Recorded; the command fails with it when executed.
                if misuse == nil { misuse = .selfDependency(name ?? typeName()) }
                return .none
            case .endedBeforeStart, .finished:
                return .ignoredFinished
            case .waiting, .enqueued, .executing:
                return .failNow(.selfDependency(name ?? typeName()))
            }
        }
        switch lifecycle {
        case .pending, .claimed:
            recordDependency(operation)
            return .none
        case .waiting(let remaining):
            recordDependency(operation)
            lifecycle = .waiting(remaining: remaining + 1)
            return .registerLate
        case .enqueued, .executing:
            return .failAfterStart
        case .endedBeforeStart, .finished:
            return .ignoredFinished
        }
    }

    /// Claimed by an execute walk or waiting for dependencies: executed, not yet handed over.
    var isExecutedAndWaiting: Bool {
        switch lifecycle {
        case .claimed, .waiting: return true
        default: return false
        }
    }

    /// Whether a dependency added now is still waited for (before the command is handed to its queue).
    var acceptsDependencies: Bool {
        switch lifecycle {
        case .pending, .claimed, .waiting: return true
        default: return false
        }
    }

    /// An edge was refused (it would close a cycle): a pending command fails with `error` when it is
    /// executed; a waiting one fails now.
    mutating func refuse(_ error: CommandError) -> Ending? {
        switch lifecycle {
        case .pending, .claimed:
            if misuse == nil { misuse = error }
            return nil
        case .waiting:
            return end(.failed(error), noClaimBeforeExecuting())
        default:
            return nil
        }
    }

    enum Removal: Sendable { case removed, absent, refused }

    /// From this many edges on, `dependencyIDs` indexes them (a fan-in of 100,000 would otherwise be
    /// quadratic to build); below, a scan of `dependencies` is cheaper than hashing, and most commands
    /// (one or two edges) never allocate a set (about 100 bytes and a hash per edge).
    static var dependencySetThreshold: Int { 16 }

    @inline(__always)
    func hasDependency(_ operation: Operation) -> Bool {
        if !dependencies.hasElement(at: Self.dependencySetThreshold - 1) {
            return dependencies.contains(operation)
        }
        return dependencyIDs.contains(ObjectIdentifier(operation))
    }

    @inline(__always)
    mutating func recordDependency(_ operation: Operation) {
        let count = dependencies.append(operation)
        if count == Self.dependencySetThreshold {
            dependencyIDs = Set(dependencies.array.lazy.map(ObjectIdentifier.init))
        } else if count > Self.dependencySetThreshold {
            dependencyIDs.insert(ObjectIdentifier(operation))
        }
    }

    /// Removes an edge; only before execute.
    mutating func removeDependency(_ operation: Operation) -> Removal {
        guard case .pending = lifecycle else { return .refused }
        guard hasDependency(operation) else { return .absent }
        if dependencies.count >= Self.dependencySetThreshold { dependencyIDs.remove(ObjectIdentifier(operation)) }
        dependencies.remove(operation)
        if dependencies.count < Self.dependencySetThreshold { clearDependencyIDs() }
        return .removed
    }

    /// Empties the edge list (when the command is released).
    @inline(__always)
    mutating func takeDependencies() -> OperationList {
        defer {
            dependencies = OperationList()
            clearDependencyIDs()
        }
        return dependencies
    }

    /// Registers a dependent, or returns this command's outcome if it already ended.
    @inline(__always)
    mutating func addDependent(_ node: CommandNode) -> DependencyAnswer {
        if let outcome { return .ended(outcome) }
        dependents.append(node)
        if case .pending = lifecycle { return .registered(pending: true) }
        return .registered(pending: false)
    }

    // MARK: - The execute walk

    @inline(__always)
    mutating func claim(walk: UInt64) -> WalkClaim {
        switch lifecycle {
        case .pending:
            lifecycle = .claimed(walk: walk, onStack: true)
            return .claimed(dependencies)
        case .claimed(let owner, let onStack) where owner == walk:
            return onStack ? .onStack : .notPending
        case .endedBeforeStart(let outcome) where queue.holder == nil:
            // Cancelled before anything started it: executing it is starting it, so it finishes now.
            lifecycle = .finished(outcome)
            return .finishedNow
        default:
            return .notPending
        }
    }

    @inline(__always)
    mutating func leaveStack(walk: UInt64) {
        if case .claimed(walk, true) = lifecycle { lifecycle = .claimed(walk: walk, onStack: false) }
    }

    enum RegisterStep: Sendable {
        /// Register with these dependencies (the count includes a hold to release after).
        case register(OperationList)
        /// Ready at once (no dependency): where it goes (see ``CommandStateMachine/place(makeQueue:admitting:)``).
        case placed(Placement)
        /// Fail with this misuse (a self-dependency).
        case fail(CommandError)
        /// Ready at once, with conditions to evaluate first (see ``Gate``).
        case evaluateGate
        /// Ended meanwhile, or not this walk's.
        case none
    }

    /// Phase two of the walk in one step: the common case of a command without dependencies goes
    /// straight to its queue (one lock round trip instead of four).
    @inline(__always)
    mutating func register(walk: UInt64, admitting: Bool, makeQueue: () -> OperationQueue) -> RegisterStep {
        guard case .claimed(walk, _) = lifecycle else { return .none }
        if let misuse { return .fail(misuse) }
        timing.executedAt = CommandTiming.now
        if dependencies.isEmpty {
            lifecycle = .enqueued
            timing.readyAt = timing.executedAt
            switch arriveAtGate() {
            case .pass: break
            case .evaluate: return .evaluateGate
            case .wait: return .none
            }
            return .placed(place(makeQueue: makeQueue, admitting: admitting))
        }
        lifecycle = .waiting(remaining: dependencies.count + 1)
        return .register(dependencies)
    }
    /// A dependency (or the registration hold, with `.completed`) finished.
    @inline(__always)
    mutating func dependencyFinished(
        _ dependencyOutcome: Termination, dependencyName: String, typeName: @autoclosure () -> String,
        isHold: Bool = false
    ) -> ReadyAction {
        guard case .waiting(let remaining) = lifecycle else {
            switch lifecycle {
            case .endedBeforeStart, .finished: return .none
            // Already handed over (with runOnFirstSuccess, before its other dependencies finished):
            // a later dependency's end changes nothing.
            case .enqueued, .executing:
                return .none
            case .pending, .claimed, .waiting:
                preconditionFailure("CommandStateMachine: dependency finished in state \(lifecycle)")
            }
        }
        let failure: CommandError?
        switch dependencyOutcome {
        case .completed: failure = nil
        case .failed(let error):
            failure = .dependencyFailed(name ?? typeName(), dependency: dependencyName, error: error)
        case .cancelled:
            failure = .dependencyCancelled(name ?? typeName(), dependency: dependencyName)
        }
        switch dependencyPolicy {
        case .cancelIfAnyFails:
            if let failure { return .ended(end(.cancelled(failure), noClaimBeforeExecuting())) }
        case .runRegardless:
            break
        case .runOnFirstSuccess:
            if let failure {
                lastDependencyFailure = failure
            } else if !isHold {
                return ready()
            }
            if remaining == 1, dependencies.count > 0, let last = lastDependencyFailure {
                // Every dependency ended without success.
                return .ended(end(.cancelled(last), noClaimBeforeExecuting()))
            }
        }
        if remaining > 1 {
            lifecycle = .waiting(remaining: remaining - 1)
            return .none
        }
        return ready()
    }

    @inline(__always)
    mutating func ready() -> ReadyAction {
        lifecycle = .enqueued
        timing.readyAt = CommandTiming.now
        switch arriveAtGate() {
        case .pass: break
        case .evaluate: return .evaluateGate
        case .wait: return .none
        }
        return .handOver
    }

    /// The engine made the command ready: its gate's answer (see ``Gate/arrive(engine:)``); `.pass`
    /// for a command without conditions, which pays this nil check only.
    @inline(__always)
    mutating func arriveAtGate() -> Gate.Arrival {
        gate == nil ? .pass : gate!.arrive(engine: true)
    }
}
