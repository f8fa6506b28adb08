import Foundation

// What the dependency half of the state machine returns (a command's neighbours are `CommandNode`s).

/// What a node that just ended hands to the propagation loop.
struct Propagation: Sendable {
    let outcome: Termination
    let source: CommandNode
    let dependents: RefList<CommandNode>
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
