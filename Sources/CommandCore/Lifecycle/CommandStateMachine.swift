import Foundation

/// The whole mutable state of one command, guarded as one value by the command's mutex. Each event is
/// a `mutating func` that returns what the caller must do after unlocking (post KVO, enqueue, deliver,
/// notify dependents, cancel the run's cancelable). It holds no thread and takes no lock, so it is
/// tested as a plain value.
///
/// Lifecycle:
/// ```
/// pending --execute--> claimed --register--> waiting(n) --n reaches 0--> enqueued --start--> executing
///    |                    |                     |                          |                     |
///    +--------------------+------cancel / dependency failed / cycle-------+--> finished(outcome) <--+
///                                                                          |
///                          (cancelled while its queue holds it) endedBeforeStart --start--> finished
/// ```
///
/// The methods the engine calls on every command are `@inline(__always)`: called from the generic
/// `Command<Output>`, a method of this generic struct needs the struct's own type metadata, found in a
/// global hash map on every call (about 300 instructions, 19% of a chain's instructions measured with
/// callgrind); inlined, it only touches fields whose layout does not depend on `Output` (17% fewer
/// instructions per command).
struct CommandStateMachine<Output: Sendable>: Sendable {

    /// The command's queue settings (not part of the lifecycle, but guarded by the same lock).
    struct QueueSettings: Sendable {
        var queue: OperationQueue?
        var ownsQueue = true
        /// `queue` is the user's queue that called `start()` and runs the command: let go of it when
        /// the command ends (a command must not keep its caller's queue alive).
        var borrowed = false
        /// The engine queue the command object itself was added to: that queue's `start()` runs it,
        /// and an ending before then waits for it (Foundation requires the queue to start it). Kept
        /// after `queue` is given back to the pool.
        var holder: ObjectIdentifier?
        /// The queue came from (and goes back to) the ``QueuePool``.
        var pooled = false
        var underlying: DispatchQueue?
        /// The command was handed to `queue`: replacing it now has no effect.
        var handedOver = false
        /// The ``Admission`` slot (a quality of service) the command holds until it starts.
        var admission: Int?
        /// A combinator node: its run only subscribes to its inputs, so once ready it runs in place on
        /// the thread that made it ready (through ``Trampoline/wiring``) instead of on a queue, unless
        /// a queue or underlying queue was assigned. Its observers are wired before `execute` returns.
        var inPlace = false
        /// No queue was assigned or made yet and no underlying queue set: the command will run on
        /// a queue the engine makes, so it goes through ``Admission``.
        var isEngineMade: Bool { queue == nil && underlying == nil }
    }

    /// How a ready command reaches its queue.
    enum HandOver: Sendable {
        /// Add it to this queue now.
        case queue(OperationQueue)
        /// Ask ``Admission`` for a slot first; no queue was made yet.
        case admission
        /// Run it in place (a combinator node; see ``QueueSettings/inPlace``).
        case inPlace
    }

    private(set) var lifecycle: Lifecycle = .pending
    /// What Foundation sees (KVO flags as published, readiness for a user's queue).
    var face = OperationFace()
    private(set) var timing = CommandTiming()
    /// Made on first use (most commands never report progress).
    var progress: Progress?
    /// What a failed or cancelled dependency does to this command.
    var dependencyPolicy = DependencyPolicy.cancelIfAnyFails
    /// With `runOnFirstSuccess`: the last failure seen, reported if no dependency succeeds.
    private var lastDependencyFailure: CommandError?
    var queue = QueueSettings()
    /// Internal consumers (combinators subscribed to this command); when the last one detaches and
    /// nobody executed the command directly, it is cancelled.
    var consumers = 0
    /// Executed directly (`execute`, `start()`): never cancelled for lack of consumers.
    var pinned = false
    /// Commands this one is built from (a combinator's inputs): kept alive until it ends.
    var inputs: [Operation] = []
    /// `run` was called and has not returned: a combinator's run reads its inputs, so they are kept
    /// until it returns even if the command ends meanwhile (a cancel racing with the start).
    private var runInProgress = false
    /// The inputs by weak reference, for pictures of the graph after the inputs were released.
    var inputLinks: [WeakOperation] = []
    /// Commands a combinator subscribed to while running (the next command of `then { }`, each inner
    /// command of `flatMap`, a `catch` recovery, a `retry` attempt), by weak reference, for pictures
    /// and stall reports; released ones are pruned as more are added (see `recordRunTimeInput`).
    var runTimeLinks: [WeakOperation] = []
    /// Called when the command is released (leak checks in tests).
    var releaseCallbacks: [@Sendable () -> Void] = []
    var name: String?
    var replay: ReplayPolicy = .all
    /// The closure of `Command { result in ... }`; released when the command ends.
    var body: (@Sendable (CommandResult<Output>) -> (any Cancelable)?)?
    private(set) var dependencies: [Operation] = []
    /// The identities of `dependencies`, so a duplicate edge is found in O(1), not O(edges): a fan-in
    /// of 100,000 dependencies would otherwise be quadratic to build.
    private var dependencyIDs: Set<ObjectIdentifier> = []
    private var dependents: [any DependencyNode] = []
    /// A misuse recorded by a call that cannot throw (a self-dependency); fails the command when executed.
    private(set) var misuse: CommandError?
    /// `start()` was called by someone other than the engine (a queue the user added it to).
    private(set) var startedExternally = false
    /// `run` was called (for state observers).
    private(set) var didExecute = false
    /// (Used by the delivery half in `CommandStateMachine+Delivery.swift`.)
    var log = ValueLog<Output>()
    /// (Used by the delivery half in `CommandStateMachine+Delivery.swift`.)
    var observers: [ObserverRecord] = []
    /// (Used by the delivery half in `CommandStateMachine+Delivery.swift`.)
    var nextObserverID: UInt64 = 0
    /// The command's drain for `.immediate` observers, made when the first one attaches (it holds
    /// the command `unowned(unsafe)`: whoever schedules it keeps the command alive).
    var drainer: (@Sendable (UInt64) -> Void)?
    /// What `run` returned; cancelled on cancel, released when the command ends.
    private var cancelable: (any Cancelable)?

    // MARK: - Queries

    @inline(__always)
    var outcome: Outcome? {
        switch lifecycle {
        case .finished(let outcome), .endedBeforeStart(let outcome): return outcome
        default: return nil
        }
    }

    var state: CommandState {
        switch lifecycle {
        case .pending, .claimed, .waiting, .enqueued: return .pending
        case .executing: return .executing
        case .endedBeforeStart(let outcome), .finished(let outcome): return outcome.state
        }
    }

    @inline(__always)
    var isExecuting: Bool {
        if case .executing = lifecycle { return true }
        return false
    }

    @inline(__always)
    var isFinished: Bool {
        if case .finished = lifecycle { return true }
        return false
    }

    @inline(__always)
    var isCancelled: Bool { outcome?.isCancelled ?? false }

    var observerCount: Int { observers.count }

    var retainedValueCount: Int { log.endIndex - log.startIndex }

    // MARK: - Dependencies

    mutating func addDependency(
        _ operation: Operation, isSelf: Bool, typeName: @autoclosure () -> String
    ) -> AddDependencyAction {
        if dependencyIDs.contains(ObjectIdentifier(operation)) { return .duplicate }
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
            dependencies.append(operation)
            dependencyIDs.insert(ObjectIdentifier(operation))
            return .none
        case .waiting(let remaining):
            dependencies.append(operation)
            dependencyIDs.insert(ObjectIdentifier(operation))
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
            return end(.failed(error))
        default:
            return nil
        }
    }

    enum Removal: Sendable { case removed, absent, refused }

    /// Removes an edge; only before execute.
    mutating func removeDependency(_ operation: Operation) -> Removal {
        guard case .pending = lifecycle else { return .refused }
        guard dependencyIDs.remove(ObjectIdentifier(operation)) != nil else { return .absent }
        dependencies.removeAll { $0 === operation }
        return .removed
    }

    /// Empties the edge list (when the command is released).
    @inline(__always)
    mutating func takeDependencies() -> [Operation] {
        defer {
            dependencies = []
            dependencyIDs = []
        }
        return dependencies
    }

    /// Registers a dependent, or returns this command's outcome if it already ended.
    @inline(__always)
    mutating func addDependent(_ node: any DependencyNode) -> Registration {
        if let outcome { return .ended(outcome) }
        dependents.append(node)
        if case .pending = lifecycle { return .registered(pending: true) }
        return .registered(pending: false)
    }

    // MARK: - The execute walk

    @inline(__always)
    mutating func claim(walk: UInt64) -> Claim {
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

    enum Registering: Sendable {
        /// Register with these dependencies (the count includes a hold to release after).
        case register([Operation])
        /// Ready at once (no dependency): hand it to `queue`.
        case enqueue(OperationQueue)
        /// Ready at once and started by `start()`: run it in that call if it is still on the stack.
        case startedReady
        /// Ready at once, to a queue the engine makes: through ``Admission``.
        case admission
        /// Ready at once, a combinator node: run it in place.
        case inPlace
        /// Fail with this misuse (a self-dependency).
        case fail(CommandError)
        /// Ended meanwhile, or not this walk's.
        case none
    }

    /// Phase two of the walk in one step: the common case of a command without dependencies goes
    /// straight to its queue (one lock round trip instead of four).
    @inline(__always)
    mutating func register(walk: UInt64, admitting: Bool, makeQueue: () -> OperationQueue) -> Registering {
        guard case .claimed(walk, _) = lifecycle else { return .none }
        if let misuse { return .fail(misuse) }
        timing.executedAt = CommandTiming.now
        if dependencies.isEmpty {
            lifecycle = .enqueued
            timing.readyAt = timing.executedAt
            if startedExternally { return .startedReady }
            if queue.inPlace && queue.isEngineMade {
                queue.handedOver = true
                return .inPlace
            }
            if admitting && queue.isEngineMade { return .admission }
            return .enqueue(handOver(makeQueue: makeQueue))
        }
        lifecycle = .waiting(remaining: dependencies.count + 1)
        return .register(dependencies)
    }

    /// The queue to hand the command to (made if needed, marked handed over), or, when `admitting`
    /// and the engine makes the queue, ``HandOver/admission`` and nothing made yet.
    @inline(__always)
    mutating func handOver(makeQueue: () -> OperationQueue, admitting: Bool) -> HandOver {
        if queue.inPlace && queue.isEngineMade && !startedExternally {
            queue.handedOver = true
            return .inPlace
        }
        if admitting && queue.isEngineMade && !startedExternally { return .admission }
        return .queue(handOver(makeQueue: makeQueue))
    }

    /// Admitted with `slot`: the queue to hand the command to.
    @inline(__always)
    mutating func handOverAdmitted(slot: Int, makeQueue: () -> OperationQueue) -> OperationQueue {
        queue.admission = slot
        return handOver(makeQueue: makeQueue)
    }

    /// The admission slot held, released when the command starts.
    @inline(__always)
    mutating func takeAdmission() -> Int? {
        defer { queue.admission = nil }
        return queue.admission
    }

    /// The queue to hand the command to, made if needed; marks it handed over.
    @inline(__always)
    mutating func handOver(makeQueue: () -> OperationQueue) -> OperationQueue {
        queue.handedOver = true
        if let existing = queue.queue { return existing }
        let made: OperationQueue
        if let underlying = queue.underlying {
            // The user's dispatch queue: a plain queue of our own, not pooled.
            made = QueuePool.queue(on: underlying)
            queue.pooled = false
        } else {
            made = makeQueue()
            queue.pooled = true
        }
        if let name { made.name = name }
        queue.queue = made
        queue.ownsQueue = true
        return made
    }

    /// A dependency (or the registration hold, with `.completed`) finished.
    @inline(__always)
    mutating func dependencyFinished(
        _ dependencyOutcome: Outcome, dependencyName: String, typeName: @autoclosure () -> String,
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
            if let failure { return .ended(end(.cancelled(failure))) }
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
                return .ended(end(.cancelled(last)))
            }
        }
        if remaining > 1 {
            lifecycle = .waiting(remaining: remaining - 1)
            return .none
        }
        return ready()
    }

    @inline(__always)
    private mutating func ready() -> ReadyAction {
        lifecycle = .enqueued
        timing.readyAt = CommandTiming.now
        return .enqueue(external: startedExternally)
    }

    // MARK: - Running

    enum StartAction: Sendable {
        case none
        /// Call `run`; `body` is the closure of `init(_:)` (nil: the subclass's override).
        case run(body: (@Sendable (CommandResult<Output>) -> (any Cancelable)?)?, wakeups: Wakeups)
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
            lifecycle = .executing
            timing.startedAt = CommandTiming.now
            timing.thread = CommandTiming.currentThread
            didExecute = true
            runInProgress = true
            return .run(body: body, wakeups: wakeStateObservers())
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

    /// `run` returned `cancelable`.
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

    @inline(__always)
    mutating func end(_ outcome: Outcome) -> Ending {
        timing.endedAt = CommandTiming.now
        let wasExecuting = isExecuting
        let postFinished: Bool
        switch lifecycle {
        case .pending:
            // Nothing started it or executed it: like a cancelled Foundation operation, it finishes when
            // something starts it (the queue holding it, `start()`, `execute`), never behind a queue's back.
            lifecycle = .endedBeforeStart(outcome)
            postFinished = false
        case .enqueued where queue.holder != nil:
            // The engine's queue holds the command object: it finishes when that queue starts it.
            lifecycle = .endedBeforeStart(outcome)
            postFinished = false
        default:
            // Started, or executed (the engine owns its run): it finishes now.
            lifecycle = .finished(outcome)
            postFinished = true
        }
        let ending = Ending(
            outcome: outcome, wasExecuting: wasExecuting, postFinished: postFinished,
            cancelable: outcome.isCancelled ? cancelable : nil, dependents: dependents,
            wakeups: wakeAll(), inputs: runInProgress ? [] : inputs, progress: progress)
        if !runInProgress { inputs = [] }
        cancelable = nil
        body = nil
        dependents = []
        if replay != .all { trim() }
        return ending
    }

    /// A terminal event from `run` (complete or fail); only while executing.
    @inline(__always)
    mutating func finish(_ outcome: Outcome) -> Ending? {
        guard case .executing = lifecycle else { return nil }
        return end(outcome)
    }

    /// `succeed`: a value and completion in one step, so observers are woken once, not twice.
    @inline(__always)
    mutating func succeed(_ value: Output) -> Ending? {
        guard case .executing = lifecycle else { return nil }
        log.append(value)
        return end(.completed)
    }

    /// Cancel, the execute token or a dependency-independent failure (cycle, misuse, late dependency):
    /// from any state that has not ended.
    @inline(__always)
    mutating func terminate(_ outcome: Outcome) -> Ending? {
        if self.outcome != nil { return nil }
        return end(outcome)
    }
}
