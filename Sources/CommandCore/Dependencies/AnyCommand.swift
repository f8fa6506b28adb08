import Foundation

// What a command is to its neighbours in a graph, and what the dependency half of the state machine
// returns.

/// A command whatever its output type, as the engine sees it: its dependencies and dependents, the
/// admission backlog (``AdmissionCandidate``), a timeout observer. It refines ``CommandFace`` (what other modules of the package
/// see), so one cast, `as? any AnyCommand`, reaches both.
protocol AnyCommand: CommandFace, AdmissionCandidate, ExclusivityWaiter {
    /// Called once by each dependency this node registered with, when that dependency ends.
    /// Returns the dependents of this node to notify in turn if this node ended because of it (so a
    /// failure propagates down a million-deep chain with a loop, not with recursion).
    ///
    /// `lane`: whether this node may take a lane queue if it becomes ready (see `QueuePool`); set to
    /// false when it took it.
    func dependencyDidFinish(_ outcome: Termination, dependencyName: @autoclosure () -> String, lane: inout Bool)
        -> Propagation?
    /// Registers `node` to be told when this one ends.
    func addDependent(_ node: any AnyCommand) -> DependencyAnswer
    /// Executes this node (and its pending dependencies) if it is pending.
    func executeGraph()
    /// The current dependency edges.
    var dependencySnapshot: [Operation] { get }
    /// The walk step of `execute`: see ``CommandStateMachine/claim(walk:)``.
    func claim(walk: UInt64) -> WalkClaim
    /// The dependency at `index` of the current edges, or nil past the last (the walk's cursor).
    func walkDependency(at index: Int) -> Operation?
    /// The walk left this node (all its dependencies were walked).
    func leaveStack(walk: UInt64)
    /// The walk's step as the node leaves its stack: registers with the dependencies and enqueues
    /// when ready.
    func register(walk: UInt64, cycleError: CommandError?) -> [any AnyCommand]
    /// The node's label in the process-wide dependency order and its has-dependents flag (see
    /// ``EdgeOrder``); read and written with `EdgeOrder.lock` held.
    var orderWord: Int64 { get set }
    /// Registers `node` to be told (``faceDependencyDidFinish()``) when this command publishes
    /// `isFinished`; false if it already did.
    func addFaceWatcher(_ node: any AnyCommand) -> Bool
    /// Unregisters `node`; false if it was not waiting any more.
    func removeFaceWatcher(_ node: any AnyCommand) -> Bool
    /// A dependency that is a command published `isFinished`: readiness for a user's queue.
    func faceDependencyDidFinish()
}

/// What a node that just ended hands to the propagation loop.
struct Propagation: Sendable {
    let outcome: Termination
    let source: any AnyCommand
    let dependents: SmallList<any AnyCommand>
}

/// The answer of a dependency to a dependent registering with it.
enum DependencyAnswer: Sendable {
    /// Registered; `pending`: the dependency has not been executed yet, so the caller must execute it.
    case registered(pending: Bool)
    /// The dependency already ended.
    case ended(Termination)
}

/// The answer of a node to the execute walk.
enum WalkClaim: Sendable {
    /// The node was pending and now belongs to this walk; these are its dependencies.
    case claimed(OperationList)
    /// The node belongs to this walk and is on the walk's stack: the edge just followed closes a cycle.
    case onStack
    /// Already executed (by this walk or another), running or finished: do not descend.
    case notPending
    /// It had ended before anything started it (a cancel); the walk starts it, so it publishes
    /// `isFinished` now. Do not descend.
    case finishedNow
}

// Non-generic, like every value the state machine returns: a generic nested type costs a metadata
// look-up per use in the unspecialised `Command<Output>`.

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
    /// Ready: hand it over (``Command/handOver(lane:)``: the one placement decision).
    case handOver
    /// Ready, with conditions to evaluate first (see ``Gate``).
    case evaluateGate
    /// Ended because of a dependency.
    case ended(Ending)
}

/// An edge between two commands, checked against the order (``EdgeOrder``).
enum EdgeAdmission: Sendable {
    /// Refused: it would close this cycle (names from the dependent back to it).
    case cycle([String])
    /// Recorded; the state machine's answer.
    case recorded(AddDependencyAction)
}
