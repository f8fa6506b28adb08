import Foundation

/// The part of every ``Command`` that does not depend on its output type: its lock-guarded state and
/// its place in the dependency graph. You never make or subclass one (it has no public initialiser):
/// subclass `Command`.
///
/// The engine holds a command's neighbours as `CommandNode` references: a dependent in a list is 8
/// bytes (16 as a protocol existential), and reaching a neighbour's graph half is a class cast and a
/// method call through the class, not a protocol conformance look-up (about 300 instructions each,
/// three a command of a chain).
///
/// Its callbacks and cancel are those of `Command` (see there); it has none of its own.
open class CommandNode: Operation, @unchecked Sendable {
    // `@unchecked Sendable`: every mutable field of the command lives in `machine`, guarded by its
    // lock (one allocation holding the lock and the state, with no object header: destroyed in
    // `deinit`), except `orderWord`, guarded by `EdgeOrder.lock`.
    let machine: OwnedLocked<CommandStateMachine>

    /// The command's place in the process-wide dependency order and whether a command depends on it
    /// (see ``EdgeOrder``). Guarded by `EdgeOrder.lock`.
    @exclusivity(unchecked) var orderWord: Int64

    override init() {
        machine = OwnedLocked(CommandStateMachine())
        orderWord = EdgeOrder.initialWord(creationIndex: CommandCounters.created())
        super.init()
    }

    /// A run's result (``RunToken``) was released; `Command` ends the run if it had not ended.
    func resultReleased() {}

    /// Delivers what waits for the `.immediate` observer `observer`, on this thread (`Command`'s
    /// drain, called by ``Trampoline/deliveries``: through the class, not a protocol of the generic
    /// `Command<Output>`, whose witness table is a runtime look-up each time it is made).
    func drainImmediately(_ observer: UInt64) { preconditionFailure("CommandNode is subclassed by Command only") }

    /// `name`, else the type (`Command<Int>`, `FetchUser`).
    public var displayName: String {
        machine.withLock { $0.name } ?? TypeNames.name(of: type(of: self))
    }

    // MARK: The graph half that needs only the state

    /// The current dependency edges.
    final var dependencySnapshot: [Operation] { machine.withLock { $0.dependencies.array } }

    /// The walk left this node (all its dependencies were walked).
    final func leaveStack(walk: UInt64) { machine.withLock { $0.leaveStack(walk: walk) } }

    /// The dependency at `index` of the current edges, or nil past the last (the walk's cursor).
    final func walkDependency(at index: Int) -> Operation? {
        machine.withLock { $0.dependencies.element(at: index) }
    }

    /// Registers `node` to be told when this one ends.
    final func addDependent(_ node: CommandNode) -> DependencyAnswer { machine.withLock { $0.addDependent(node) } }

    /// Registers `node` to be told (``faceDependencyDidFinish()``) when this command publishes
    /// `isFinished`; false if it already did.
    final func addFaceWatcher(_ node: CommandNode) -> Bool { machine.withLock { $0.face.addWatcher(node) } }

    /// Unregisters `node`; false if it was not waiting any more.
    final func removeFaceWatcher(_ node: CommandNode) -> Bool { machine.withLock { $0.face.removeWatcher(node) } }

    /// Called once by each dependency this node registered with, when that dependency ends.
    final func dependencyDidFinish(_ outcome: Termination, dependencyName: @autoclosure () -> String, lane: inout Bool)
        -> Propagation?
    {
        dependencyDidFinish(outcome, dependencyName: dependencyName(), isHold: false, lane: &lane)
    }

    /// The same, off any lane; `isHold`: the registration's own hold is released.
    final func dependencyDidFinish(_ outcome: Termination, dependencyName: @autoclosure () -> String, isHold: Bool)
        -> Propagation?
    {
        var lane = false
        return dependencyDidFinish(outcome, dependencyName: dependencyName(), isHold: isHold, lane: &lane)
    }

    // MARK: What `Command` implements (it runs the typed work)

    /// A dependency ended. Returns the dependents of this node to notify in turn if this node ended
    /// because of it (so a failure propagates down a million-deep chain with a loop, not with
    /// recursion). `lane`: whether this node may take a lane queue if it becomes ready (see
    /// `QueuePool`); set to false when it took it.
    func dependencyDidFinish(
        _ outcome: Termination, dependencyName: @autoclosure () -> String, isHold: Bool, lane: inout Bool
    ) -> Propagation? {
        preconditionFailure("CommandNode is subclassed by Command only")
    }

    /// Executes this node (and its pending dependencies) if it is pending.
    func executeGraph() { preconditionFailure("CommandNode is subclassed by Command only") }

    /// The walk step of `execute`: see ``CommandStateMachine/claim(walk:)``.
    func claim(walk: UInt64) -> WalkClaim { preconditionFailure("CommandNode is subclassed by Command only") }

    /// The walk's step as the node leaves its stack: registers with the dependencies and enqueues
    /// when ready; returns dependencies found pending (added during the walk), which the caller executes.
    func register(walk: UInt64, cycleError: CommandError?) -> [CommandNode] {
        preconditionFailure("CommandNode is subclassed by Command only")
    }

    /// A dependency that is a command published `isFinished`: readiness for a user's queue.
    func faceDependencyDidFinish() { preconditionFailure("CommandNode is subclassed by Command only") }

    /// Admitted with `slot` (see ``Admission``): takes a queue and adds the command to it; false if the
    /// command had ended meanwhile (a cancel): it needs no queue, and the slot is free again.
    func handOverAdmitted(slot: Int) -> Bool { preconditionFailure("CommandNode is subclassed by Command only") }

    deinit {
        // Here, not in `Command`'s deinit: every node made counts as made and as released.
        CommandCounters.released()
        // After `Command`'s deinit, the last to use the state.
        machine.destroy()
    }
}
