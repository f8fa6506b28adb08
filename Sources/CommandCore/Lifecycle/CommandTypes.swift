import Foundation

// The values the command state machine exchanges with the command that runs it: what a command is
// to its neighbours in a graph, and the actions each event returns.

/// A command seen by its dependencies and dependents, whatever its output type.
protocol DependencyNode: AnyObject, Sendable {
    /// Called once by each dependency this node registered with, when that dependency ends.
    /// Returns the dependents of this node to notify in turn if this node ended because of it (so a
    /// failure propagates down a million-deep chain with a loop, not with recursion).
    ///
    /// `lane`: whether this node may take a lane queue if it becomes ready (see `QueuePool`); set to
    /// false when it took it.
    func dependencyDidFinish(_ outcome: Outcome, dependencyName: @autoclosure () -> String, lane: inout Bool)
        -> Propagation?
    /// Registers `node` to be told when this one ends.
    func addDependent(_ node: any DependencyNode) -> Registration
    /// Executes this node (and its pending dependencies) if it is pending.
    func executeGraph()
    /// The current dependency edges.
    var dependencySnapshot: [Operation] { get }
    /// The walk step of `execute`: see ``CommandStateMachine/claim(walk:)``.
    func claim(walk: UInt64) -> Claim
    /// The walk left this node (all its dependencies were walked).
    func leaveStack(walk: UInt64)
    /// Second phase of the walk: registers with the dependencies and enqueues when ready.
    func register(walk: UInt64, cycleError: CommandError?) -> [any DependencyNode]
    /// `name`, else the type.
    var displayName: String { get }
    /// The order the command was created in.
    var creationOrder: UInt64 { get }
    /// Registers `node` to be told (``faceDependencyDidFinish()``) when this command publishes
    /// `isFinished`; false if it already did.
    func addFaceWatcher(_ node: any DependencyNode) -> Bool
    /// Unregisters `node`; false if it was not waiting any more.
    func removeFaceWatcher(_ node: any DependencyNode) -> Bool
    /// A dependency that is a command published `isFinished`: readiness for a user's queue.
    func faceDependencyDidFinish()
}

/// What a node that just ended hands to the propagation loop.
struct Propagation: Sendable {
    let outcome: Outcome
    let source: any DependencyNode
    let dependents: [any DependencyNode]
}

/// The answer of a dependency to a dependent registering with it.
enum Registration: Sendable {
    /// Registered; `pending`: the dependency has not been executed yet, so the caller must execute it.
    case registered(pending: Bool)
    /// The dependency already ended.
    case ended(Outcome)
}

/// The answer of a node to the execute walk.
enum Claim: Sendable {
    /// The node was pending and now belongs to this walk; these are its dependencies.
    case claimed([Operation])
    /// The node belongs to this walk and is on the walk's stack: the edge just followed closes a cycle.
    case onStack
    /// Already executed (by this walk or another), running or finished: do not descend.
    case notPending
    /// It had ended before anything started it (a cancel); the walk starts it, so it publishes
    /// `isFinished` now. Do not descend.
    case finishedNow
}

// MARK: - Actions (non-generic: generic nested types cost a metadata lookup per use in unspecialised code)

enum AddDependencyAction: Sendable {
    case none
    /// Added while waiting: register with it (after a cycle check) and count it.
    case registerLate
    /// Too late: fail the command (it was handed to its queue already).
    case failAfterStart
    /// The command has ended; the edge is ignored.
    case ignoredFinished
    /// Already a dependency.
    case duplicate
    /// A misuse that fails the command now (a self-dependency once executed).
    case failNow(CommandError)
}

enum ReadyAction: Sendable {
    case none
    /// Hand the command to its queue (`external`: with a trampoline, the command being already
    /// held by a queue that started it).
    case enqueue(external: Bool)
    /// Ended because of a dependency.
    case ended(Ending)
}

enum RunReturnAction: Sendable {
    case keep
    /// The command was cancelled while `run` ran: cancel what it returned.
    case cancel
    /// The command already ended otherwise: drop it.
    case drop
}

/// Everything to do after a command ended, outside the lock.
struct Ending: Sendable {
    let outcome: Outcome
    /// Was executing: post `isExecuting` as well.
    let wasExecuting: Bool
    /// Post `isFinished` now (false while a queue still has to start it).
    let postFinished: Bool
    /// Cancel this (the run's cancelable) when the ending is a cancel.
    let cancelable: (any Cancelable)?
    let dependents: [any DependencyNode]
    let wakeups: Wakeups
    /// A combinator's inputs, released (with a loop) once the ending was performed.
    let inputs: [Operation]
    /// The command's progress, completed after the lock is released (see ``ProgressGuard``).
    let progress: Progress?
}

/// Where a command is in its life (see ``CommandStateMachine``); not generic, so unspecialised code
/// pays no metadata lookup for it.
enum Lifecycle: Sendable {
    case pending
    /// Owned by the execute walk `walk`; `onStack` while its dependencies are being walked.
    case claimed(walk: UInt64, onStack: Bool)
    /// Registered with its dependencies; `remaining` of them (plus one hold while registering)
    /// have not finished.
    case waiting(remaining: Int)
    /// Handed to its queue; `start()` not called yet.
    case enqueued
    case executing
    /// Ended (cancelled) before anything started or executed it: like a cancelled Foundation
    /// operation, `isFinished` turns true when something starts it (the queue holding it, `start()`,
    /// `execute`).
    case endedBeforeStart(Outcome)
    case finished(Outcome)
}

/// One observer of a command: where its callbacks run, what it wants and how far it got.
/// What an observer is given, as passed to `attach` (only there: the record keeps a ``SinkBox``).
enum ObserverSink<Output: Sendable>: Sendable {
    case events(@Sendable (CommandEvent<Output>) -> Void)
    case states(@Sendable (CommandState) -> Void)
    /// A combinator's fast path: values as they are, the terminal event as an event.
    case values(@Sendable (Output) -> Void, terminal: @Sendable (CommandEvent<Output>) -> Void)
}

/// An observer's handlers, boxed so that ``ObserverRecord`` is not generic: the records are read and
/// written on every value, and a generic record (`ObserverRecord<Output>`) costs a metadata look-up
/// in the runtime's hash table on each access from the unspecialised `Command<Output>` (three per
/// value per stage in a `map` chain, measured with callgrind). The box is cast back with
/// `unsafeDowncast` by the command that made it, which knows its `Output`.
final class SinkBox<Output: Sendable>: Sendable {
    /// Every event (`execute`, `observe`).
    let events: (@Sendable (CommandEvent<Output>) -> Void)?
    /// Values only, for a combinator consuming this command; `events` then gets only the terminal.
    let values: (@Sendable (Output) -> Void)?
    let states: (@Sendable (CommandState) -> Void)?

    init(_ sink: ObserverSink<Output>) {
        switch sink {
        case .events(let handler): (events, values, states) = (handler, nil, nil)
        case .states(let handler): (events, values, states) = (nil, nil, handler)
        case .values(let handler, let terminal): (events, values, states) = (terminal, handler, nil)
        }
    }

    /// Delivers a value: to the value handler, else as an event.
    @inline(__always)
    func deliver(_ value: Output) {
        if let values { values(value) } else { deliverAsEvent(value) }
    }

    /// Out of line, so the value path does not fetch `CommandEvent<Output>`'s metadata.
    @inline(never)
    func deliverAsEvent(_ value: Output) { events?(.value(value)) }

    /// The terminal event; out of line for the same reason.
    @inline(never)
    func deliver(_ outcome: Outcome) { events?(outcome.event()) }
}

/// What a drain delivers next. Not generic, and not nested in the generic state machine (which would
/// make it generic: a metadata look-up per value; see ``SinkBox``): a value is moved into the drain's
/// slot instead of carried here.
enum Delivery {
    /// The value now in the slot, for the ``SinkBox`` `box`; `more`: something else already waits
    /// for this observer.
    case value(box: AnyObject, more: Bool)
    case terminal(Outcome, box: AnyObject)
    case state(CommandState, box: AnyObject)
    /// Nothing left: the drain stops (and the observer is no longer scheduled).
    case idle
}

struct ObserverRecord: Sendable {
    /// Events (values and the terminal event) or state changes.
    enum Kind: Sendable { case events, states }

    let id: UInt64
    let context: CallbackContext
    let kind: Kind
    /// A ``SinkBox`` of the command's `Output`.
    let sink: any AnyObject & Sendable
    /// Absolute index in the value log of the next value to deliver.
    var cursor: Int
    /// A drain is scheduled or running on `context`; at most one at a time, which is what keeps
    /// deliveries ordered and never overlapping.
    var scheduled = false
    /// For state observers: `.executing` was delivered.
    var sentExecuting = false
}

/// A drain to schedule: the observer and its context, and for an `.immediate` observer the
/// command's drain function (made once per command: scheduling allocates nothing per value).
struct Wakeup: Sendable {
    let observer: UInt64
    let context: CallbackContext
    let drain: (@Sendable (UInt64) -> Void)?
}

/// An observer claimed for a value as it was sent, to be delivered in place (see
/// `CommandStateMachine.send(_:claimInPlace:)`); its ``SinkBox`` and id.
struct DirectClaim {
    let observer: UInt64
    let box: AnyObject
}

/// The drains to schedule after a change: the first inline, so waking one observer (the common
/// case: a stage of a chain) allocates nothing.
struct Wakeups: Sendable {
    private(set) var first: Wakeup?
    private(set) var rest: [Wakeup] = []

    init() {}

    init(_ wakeup: Wakeup?) { first = wakeup }

    var isEmpty: Bool { first == nil }
    var count: Int { first == nil ? 0 : 1 + rest.count }

    mutating func append(_ wakeup: Wakeup) {
        if first == nil { first = wakeup } else { rest.append(wakeup) }
    }
}

/// A weak reference to an operation (an edge kept for pictures, not for lifetime).
final class WeakOperation: Sendable {
    // Written once in init, only read afterwards (the runtime's weak loads are thread-safe); not
    // `weak let`, which needs Swift 6.2.3.
    nonisolated(unsafe) weak var operation: Operation?
    init(_ operation: Operation) { self.operation = operation }
}

/// What a command does when one of its dependencies fails or is cancelled.
public enum DependencyPolicy: Sendable, Equatable {
    /// It does not run: it ends cancelled with ``CommandError/Code/dependencyFailed`` or
    /// ``CommandError/Code/dependencyCancelled`` naming the dependency. The default, and Foundation's
    /// spirit: a dependent needs its dependencies' work.
    case cancelIfAnyFails
    /// It runs once every dependency ended, however they ended (a fan-in that collects whatever it
    /// can, a clean-up step): its run reads their states.
    case runRegardless
    /// It runs as soon as one dependency completed (the first success of several sources); if every
    /// one failed or was cancelled, it ends cancelled with the last of those errors.
    case runOnFirstSuccess
}
