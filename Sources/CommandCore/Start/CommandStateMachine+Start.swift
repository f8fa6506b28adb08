import Foundation

// The state machine's half of starting: what a start does in each lifecycle state, a subject's start at
// creation, and what to do with what `run` returned.
extension CommandStateMachine {
    enum StartAction: Sendable {
        case none
        /// Call `run` (with the command's `body`, read under the same lock).
        case run(wakeups: Wakeups)
        /// Post `isFinished` (the command ended while its queue held it).
        case postFinished
        /// Started by a queue the user added it to: execute it (walk the dependencies).
        case execute
    }

    /// `external`: `start()` was called (by a queue holding the command, or by hand); otherwise the
    /// engine's own block on the command's queue. A run the engine claimed stays the engine's: an
    /// external start of an enqueued command only records that the caller waits for `isFinished`.
    @inline(__always)
    mutating func start(external: Bool, startedByHoldingQueue: Bool = false) -> StartAction {
        switch lifecycle {
        case .enqueued where external && !startedByHoldingQueue:
            startedExternally = true
            return .none
        case .enqueued:
            let settled = noClaimBeforeExecuting()
            lifecycle = .executing
            timing.startedAt = CommandTiming.now
            timing.threadID = CommandTiming.currentThread
            didExecute = true
            runInProgress = true
            return .run(wakeups: wakeStateObservers(settled))
        case .endedBeforeStart where queue.holder != nil && !startedByHoldingQueue:
            // The engine's queue holds the command object: only that queue may finish it.
            if external { startedExternally = true }
            return .none
        case .endedBeforeStart(let outcome):
            lifecycle = .finished(outcome)
            return .postFinished
        case .pending:
            if external {
                startedExternally = true
                pinned = true
            }
            return external ? .execute : .none
        case .claimed, .waiting:
            if external { startedExternally = true }
            return .none
        case .executing, .finished:
            return .none
        }
    }

    /// A ``CommandSubject`` starts in its own `init`, where nothing can have touched it yet (no edge,
    /// observer, queue or KVO observer): straight to executing, with `isExecuting` already true and no
    /// KVO pair (nobody can be observing), and no `run` (a subject has no work of its own). The same
    /// state `start()` reaches through the execute walk, without the walk (most of a `flatMap`
    /// inner's creation cost).
    @inline(__always)
    mutating func startAtCreation() {
        guard case .pending = lifecycle else { preconditionFailure("startAtCreation: the command was touched") }
        lifecycle = .executing
        timing.startedAt = CommandTiming.now
        timing.threadID = CommandTiming.currentThread
        didExecute = true
        startedExternally = true
        pinned = true
        face.executing = true
    }

    /// A ready-value command nothing has touched (pending, no dependency, observer, condition, progress
    /// or queue of yours): a combinator may read its stored outcome instead of running it.
    @inline(__always)
    var isUntouchedReadyValue: Bool {
        guard queue.readyValue, case .pending = lifecycle else { return false }
        return observers.isEmpty && dependencies.count == 0 && !hasRareFields && face.tracking == .off
    }

    /// `run` returned `returned` (nil also when it was not called because the command was cancelled
    /// first); the inputs to release now if the command ended while `run` ran.
    @inline(__always)
    mutating func runReturned(_ returned: (any Cancelable)?) -> (RunReturnAction, release: [Operation]) {
        runInProgress = false
        var release: [Operation] = []
        if outcome != nil {
            release = inputs
            inputs = []
        }
        guard let returned else { return (.drop, release) }
        switch lifecycle {
        case .executing:
            cancelable = returned
            return (.keep, release)
        case .finished(.cancelled):
            return (.cancel, release)
        default:
            return (.drop, release)
        }
    }
}

/// What to do with what `run` returned (non-generic, like every value the state machine returns).
enum RunReturnAction: Sendable {
    case keep
    /// The command was cancelled while `run` ran: cancel what it returned.
    case cancel
    /// The command already ended otherwise: drop it.
    case drop
}
