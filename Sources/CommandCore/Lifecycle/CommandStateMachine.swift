import Foundation

/// The fields of ``CommandStateMachine`` that most commands never set, kept out of line: every node of
/// a graph carries the state machine, and these eight cost 64 bytes a node inline (8 as a box pointer).
struct RareFields: Sendable {
    var gate: Gate?
    var progress: Progress?
    var lastDependencyFailure: CommandError?
    var misuse: CommandError?
    var runTimeLinks: [Weak<Operation>] = []
    var releaseCallbacks: [@Sendable () -> Void] = []
    /// The groups whose hold each category runs inside (see ``ExclusivityBook/Key/scope``), given by
    /// the group that runs this command; kept without conditions too, for a group that passes its
    /// ancestors' holds on to its own children.
    var categoryScopes: [String: ObjectIdentifier] = [:]
    /// Lifecycle observers (``CommandObserver``), in the order added.
    var lifecycleObservers: [any CommandObserver] = []
    /// Called once with the command's `progress` when it is made (a group adopts its children's
    /// progress only then: a group nobody asks for progress makes none per child).
    var progressMade: (@Sendable (Progress) -> Void)?
    /// The identities of the dependencies once there are many (see
    /// ``CommandStateMachine/dependencySetThreshold``): only a wide fan-in's sink has them.
    var dependencyIDs: Set<ObjectIdentifier> = []
    /// The sinks of observers removed while a drain or an in-place delivery was under way for them
    /// (by id), kept alive until that delivery is over: an in-place delivery holds its sink unretained
    /// (see ``InPlaceClaim``). Released when the observer's drain or idle mark finds it gone.
    var retiredSinks: [(observer: UInt64, sink: any AnyObject & Sendable)] = []
}

/// The box of ``RareFields``; part of the state machine's value, so guarded by the command's lock.
final class RareBox: @unchecked Sendable {
    // `@unchecked Sendable`: only touched through the state machine, under its command's lock.
    /// `@exclusivity(unchecked)`: only reached under the command's lock, never re-entrantly; the
    /// runtime's access tracking cost a few hundred instructions a gated command.
    @exclusivity(unchecked) var fields: RareFields
    init(_ fields: RareFields) { self.fields = fields }
}

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
/// Not generic: the values live in a ``ValueLog`` whose typed methods take `Output` as their own
/// generic parameter, and the run's closure is kept by the command (`Command.body`). A generic state
/// would cost every command its type's metadata look-ups in the runtime's hash table (to make its
/// lock's storage, to reach its methods, to destroy it: about 2,500 instructions a command).
/// The methods the engine calls on every command are still `@inline(__always)`: they run inside the
/// lock's closure in the unspecialised `Command<Output>`.
///
/// One struct, its halves by behaviour: the lifecycle here (the states and the end); starting in
/// `Start/CommandStateMachine+Start.swift`; edges, the execute walk and dependencies' endings in
/// `Dependencies/CommandStateMachine+Dependencies.swift`; where a ready command goes in
/// `Scheduling/CommandStateMachine+HandOver.swift`; a combinator's inputs in
/// `Inputs/CommandStateMachine+Inputs.swift`; values and observers in
/// `Delivery/CommandStateMachine+Delivery.swift`.
struct CommandStateMachine: Sendable {
    var timing = CommandTiming()
    /// Internal consumers (combinators subscribed to this command); when the last one detaches and
    /// nobody executed the command directly, it is cancelled. Four bytes, in the last four of the
    /// timing's word (36 bytes long).
    var consumers: Int32 = 0
    var queue = QueueSettings()
    /// Commands this one is built from (a combinator's inputs): kept alive until it ends.
    var inputs: [Operation] = []
    /// A stateless stage's description, for a consumer that fuses it (`Inputs/Command+Fusion.swift`).
    var fusibleStage: (any AnyObject & Sendable)?
    /// What most commands never set (conditions, progress, a misuse, run-time inputs, release
    /// callbacks), made on first write (see ``RareFields``).
    private var rareBox: RareBox?
    /// The inputs by weak reference, for pictures of the graph after the inputs were released.
    var inputLinks: [Weak<Operation>] = []
    var name: String?
    var dependencies = OperationList()
    /// The graph or group watching this command's end, told on the thread where it ended (see
    /// ``EndWatch``); cleared by the ending.
    var endWatch: EndWatch?
    var dependents = RefList<CommandNode>()
    /// (Used by the delivery half in `CommandStateMachine+Delivery.swift`.)
    var log = ValueLog()
    /// (Used by the delivery half in `CommandStateMachine+Delivery.swift`.)
    var observers = ObserverList()
    /// (Used by the delivery half in `CommandStateMachine+Delivery.swift`.)
    var nextObserverID: UInt64 = 0
    /// What `run` returned: cancelled on cancel, released when the command ends (set in `runReturned`,
    /// cleared in `end`). An `any Cancelable` kept as its object (8 bytes where the existential is 16):
    /// the ending that cancels it casts it back.
    var cancelable: (any AnyObject & Sendable)?
    // The fields narrower than a word last, together: between wider fields each would cost a padded
    // word (`StateLayoutTests` checks the size).
    /// What Foundation sees (KVO flags as published, readiness for a user's queue).
    var face = OperationFace()
    /// Where the command is in its life (see ``Lifecycle``).
    var lifecycle: Lifecycle = .pending
    /// A `Graph` or a group made `progress` a child of its own (a `Progress` has one parent).
    var progressAdopted = false
    /// What a failed or cancelled dependency does to this command.
    var dependencyPolicy = DependencyPolicy.cancelIfAnyFails
    /// Executed directly (`execute`, `start()`): never cancelled for lack of consumers.
    var pinned = false
    /// `run` was called and has not returned: a combinator's run reads its inputs, so they are kept
    /// until it returns even if the command ends meanwhile (a cancel racing with the start).
    var runInProgress = false
    var replay: ReplayPolicy = .all
    /// `start()` was called by someone other than the engine (a queue the user added it to).
    var startedExternally = false
    /// `run` was called (for state observers).
    var didExecute = false

    // MARK: - Fields most commands never set

    /// The rarely set fields, read without allocating; written through a box made on first write and
    /// copied first if a copy of this state shares it (the state is a value).
    var rare: RareFields {
        get { rareBox?.fields ?? RareFields() }
        _modify {
            if rareBox == nil {
                rareBox = RareBox(RareFields())
            } else if !isKnownUniquelyReferenced(&rareBox!) {
                rareBox = RareBox(rareBox!.fields)
            }
            yield &rareBox!.fields
        }
    }

    /// Whether the box of rarely set fields was made (for tests: a plain command never makes it).
    var hasRareFields: Bool { rareBox != nil }

    /// The conditions and categories checked before the run; nil for a command without any.
    ///
    /// Written in place in the box (made on the first write, copied first only if a copy of this state
    /// shares it). The engine writes it only where a gate exists or is being made (``endGate()``
    /// guards the ending), so a command without conditions never makes the box; and the accessor
    /// keeps no gate-sized local of its own, so its coroutine's frame fits the caller's buffer (a
    /// local `Gate?` here made every write a `malloc`: nine an exclusive command).
    var gate: Gate? {
        @inline(__always) get { rareBox?.fields.gate }
        _modify {
            if rareBox == nil {
                rareBox = RareBox(RareFields())
            } else if !isKnownUniquelyReferenced(&rareBox!) {
                rareBox = RareBox(rareBox!.fields)
            }
            yield &rareBox!.fields.gate
        }
    }

    /// Changes the gate in place, if there is one: nil (`body` not called) if there is none. For the
    /// closures the engine does not inline: where the `gate` accessor is called rather than inlined,
    /// its coroutine's frame is a `malloc`.
    @inline(__always)
    mutating func withGate<Result>(_ body: (inout Gate) -> Result) -> Result? {
        guard rareBox?.fields.gate != nil else { return nil }
        if !isKnownUniquelyReferenced(&rareBox!) { rareBox = RareBox(rareBox!.fields) }
        return body(&rareBox!.fields.gate!)
    }

    /// The gate's phase, read in place (the `gate` getter copies the whole gate).
    var gatePhase: Gate.Phase? { rareBox?.fields.gate?.phase }

    /// Ends the gate, if there is one (`Gate.end()`): a command without a gate never enters the
    /// `gate` accessor's coroutine, whose frame is allocated on the heap (one `malloc` a command).
    @inline(__always)
    mutating func endGate() -> GateCleanup? {
        guard rareBox?.fields.gate != nil else { return nil }
        return gate!.end()
    }

    /// Forgets the dependencies' identities, if they were indexed; like ``endGate()``, nothing for a
    /// command that has none.
    @inline(__always)
    mutating func clearDependencyIDs() {
        guard rareBox?.fields.dependencyIDs.isEmpty == false else { return }
        dependencyIDs = []
    }

    /// Made on first use (most commands never report progress).
    var progress: Progress? {
        get { rareBox?.fields.progress }
        _modify {
            if rareBox != nil {
                yield &rare.progress
            } else {
                // No box yet: a write of nothing (a mutating call on nil, an empty list) makes none.
                var value: Progress? = nil
                yield &value
                if value != nil { rare.progress = value }
            }
        }
    }
    /// With `runOnFirstSuccess`: the last failure seen, reported if no dependency succeeds.
    var lastDependencyFailure: CommandError? {
        get { rareBox?.fields.lastDependencyFailure }
        _modify {
            if rareBox != nil {
                yield &rare.lastDependencyFailure
            } else {
                // No box yet: a write of nothing (a mutating call on nil, an empty list) makes none.
                var value: CommandError? = nil
                yield &value
                if value != nil { rare.lastDependencyFailure = value }
            }
        }
    }
    /// A misuse recorded by a call that cannot throw (a self-dependency); fails the command when executed.
    var misuse: CommandError? {
        get { rareBox?.fields.misuse }
        _modify {
            if rareBox != nil {
                yield &rare.misuse
            } else {
                // No box yet: a write of nothing (a mutating call on nil, an empty list) makes none.
                var value: CommandError? = nil
                yield &value
                if value != nil { rare.misuse = value }
            }
        }
    }
    /// Commands a combinator subscribed to while running (the next command of `then { }`, each inner
    /// command of `flatMap`, a `catch` recovery, a `retry` attempt), by weak reference, for pictures
    /// and stall reports; released ones are pruned as more are added (see `recordRunTimeInput`).
    var runTimeLinks: [Weak<Operation>] {
        get { rareBox?.fields.runTimeLinks ?? [] }
        _modify {
            if rareBox != nil {
                yield &rare.runTimeLinks
            } else {
                // No box yet: a write of nothing (a mutating call on nil, an empty list) makes none.
                var value: [Weak<Operation>] = []
                yield &value
                if !value.isEmpty { rare.runTimeLinks = value }
            }
        }
    }
    /// Called when the command is released (leak checks in tests).
    var releaseCallbacks: [@Sendable () -> Void] {
        get { rareBox?.fields.releaseCallbacks ?? [] }
        _modify {
            if rareBox != nil {
                yield &rare.releaseCallbacks
            } else {
                // No box yet: a write of nothing (a mutating call on nil, an empty list) makes none.
                var value: [@Sendable () -> Void] = []
                yield &value
                if !value.isEmpty { rare.releaseCallbacks = value }
            }
        }
    }

    /// See ``RareFields/lifecycleObservers``; empty (a nil check) for a command without observers.
    var lifecycleObservers: [any CommandObserver] {
        @inline(__always) get { rareBox?.fields.lifecycleObservers ?? [] }
        _modify {
            if rareBox != nil {
                yield &rare.lifecycleObservers
            } else {
                // No box yet: a write of nothing makes none.
                var value: [any CommandObserver] = []
                yield &value
                if !value.isEmpty { rare.lifecycleObservers = value }
            }
        }
    }

    /// The identities of `dependencies` once there are `dependencySetThreshold` of them, so a
    /// duplicate edge is found in O(1), not O(edges): a fan-in of 100,000 dependencies would otherwise
    /// be quadratic to build. Empty below the threshold (see `hasDependency`), and then no box is made.
    var dependencyIDs: Set<ObjectIdentifier> {
        get { rareBox?.fields.dependencyIDs ?? [] }
        _modify {
            if rareBox != nil {
                yield &rare.dependencyIDs
            } else {
                var value: Set<ObjectIdentifier> = []
                yield &value
                if !value.isEmpty { rare.dependencyIDs = value }
            }
        }
    }

    /// See ``RareFields/categoryScopes``.
    var categoryScopes: [String: ObjectIdentifier] {
        get { rareBox?.fields.categoryScopes ?? [:] }
        _modify {
            if rareBox != nil {
                yield &rare.categoryScopes
            } else {
                // No box yet: a write of nothing makes none.
                var value: [String: ObjectIdentifier] = [:]
                yield &value
                if !value.isEmpty { rare.categoryScopes = value }
            }
        }
    }

    // MARK: - Queries

    @inline(__always)
    var outcome: Termination? {
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

    @inline(__always)
    mutating func end(_ outcome: Termination, _ settled: ClaimsSettled) -> Ending {
        // For the release of the run's result, which then needs no lock (`Command.resultReleased`).
        // An end before the start has no word here, and no run.
        settled.word?.markEnded()
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
            wakeups: wakeAll(settled), inputs: runInProgress ? [] : inputs, progress: progress, gate: endGate(),
            observers: lifecycleObservers, endWatch: endWatch)
        endWatch = nil
        if !runInProgress { inputs = [] }
        cancelable = nil
        dependents = RefList()
        if replay != .all { trim() }
        return ending
    }

    /// A terminal event from `run` (complete or fail); only while executing.
    @inline(__always)
    mutating func finish(_ outcome: Termination, word: ClaimWord) -> Ending? {
        guard case .executing = lifecycle else { return nil }
        return end(outcome, settleInPlaceClaim(word))
    }

    /// `succeed`: a value and completion in one step, so observers are woken once, not twice.
    @inline(__always)
    mutating func succeed<Output: Sendable>(_ value: Output, word: ClaimWord) -> Ending? {
        guard case .executing = lifecycle else { return nil }
        let settled = settleInPlaceClaim(word)
        log.append(value)
        return end(.completed, settled)
    }

    /// Cancel, the execute token or a dependency-independent failure (cycle, misuse, late dependency):
    /// from any state that has not ended.
    @inline(__always)
    mutating func terminate(_ outcome: Termination, word: ClaimWord) -> Ending? {
        if self.outcome != nil { return nil }
        return end(outcome, settleInPlaceClaim(word))
    }
}
