import Foundation

/// A command whatever its output type: the one type-erased face of `Command<Output>` that other modules
/// of the package (`CommandGraph`'s graphs and groups, the test tools) use. Inside `CommandCore`, the
/// engine reaches a command's graph half through its base class, ``CommandNode`` (a class cast).
package protocol CommandFace: AnyObject, Sendable {
    /// `name`, else the type.
    var displayName: String { get }
    var state: CommandState { get }
    var timing: CommandTiming { get }
    var dependencies: [Operation] { get }

    // MARK: Running it as a part of something (a group's child, a graph's node, a condition's dependency)

    /// Calls `ended` with the terminal state, on the thread where the command ended.
    func observeEnd(_ ended: @escaping @Sendable (CommandState) -> Void)
    /// Tells `watch` the command and its terminal state, on the thread where it ended: nothing is
    /// allocated per command (a graph or group passes one watch for all its members).
    func watchEnd(by watch: EndWatch)
    /// Every state change, on `context` (`Command.observeState(on:_:)` itself).
    @discardableResult
    func observeState(on context: CallbackContext?, _ handler: @escaping @Sendable (CommandState) -> Void)
        -> any Cancelable
    /// Executes it with no observer of its own (its end is watched with ``observeEnd(_:)``).
    func executeQuietly()
    /// Its progress, unless another graph or group already counts it (a `Progress` has one parent).
    func progressForAdoption() -> Progress?
    /// Runs its categories inside the holds of the groups in `scopes`.
    func scopeCategories(_ scopes: [String: ObjectIdentifier])

    // MARK: What test tools and reports read

    /// Calls `callback` when the command is released.
    func onRelease(_ callback: @escaping @Sendable () -> Void)
    /// Its dependencies and inputs, held strongly.
    var heldCommands: [Operation] { get }
    /// A combinator's inputs (not its dependencies).
    var inputCommands: [Operation] { get }
    /// The commands a combinator subscribed to while running, still alive.
    var runTimeInputs: [Operation] { get }
    /// The mutually exclusive categories of its conditions, sorted.
    var mutuallyExclusiveCategories: [String] { get }
    /// Its gate's phase (nil without conditions): "evaluating", "waitingForCategories", ...
    var gatePhase: String? { get }
    /// Who holds the categories it waits for.
    var categoryHolders: [(category: String, holder: String, since: UInt64)] { get }
}

extension Command: CommandFace {
    package func observeEnd(_ ended: @escaping @Sendable (CommandState) -> Void) {
        observeState(on: .immediate) { state in if state.isTerminal { ended(state) } }
    }
}

// The calls a graph makes on each of its nodes, on the command's non-generic half: a graph keeps its
// nodes as 8-byte `CommandNode` references (a `CommandFace` existential is 16 bytes a node) and
// reaches these through the class, without a conformance look-up.
extension CommandNode {
    package func watchEnd(by watch: EndWatch) {
        // One watch a command: a second (a command in two graphs), or a command that already ended,
        // is told through an observer (which replays the end).
        let kept = machine.withLock { machine -> Bool in
            guard machine.endWatch == nil, machine.outcome == nil else { return false }
            machine.endWatch = watch
            return true
        }
        if !kept { face.observeEnd { [self] state in watch.ended(self, state) } }
    }

    /// Pinned as `execute` pins (never cancelled for lack of consumers), without an observer: the
    /// caller watches the end itself (a group's child, a condition's dependency).
    package func executeQuietly() {
        machine.withLock { $0.pinned = true }
        executeGraph()
    }

    /// The command seen whatever its output type (every `CommandNode` is a `Command`): a dynamic
    /// cast, for the calls a graph makes rarely.
    package var face: any CommandFace {
        guard let face = self as? any CommandFace else {
            preconditionFailure("CommandNode is subclassed by Command only")
        }
        return face
    }
}

/// Told when a command it watches ended (``CommandFace/watchEnd(by:)``), on the thread where the
/// command ended (through the delivery trampoline, as an `.immediate` observer), after its observers'
/// wake-ups were scheduled and its KVO notifications posted, before its dependents are told: one watch for every
/// member of a graph or a group, held by each member until it ends (8 bytes a command, nothing
/// allocated per command; an observer per member cost about 400 bytes a node).
package final class EndWatch: Sendable {
    private let handler: @Sendable (Operation, CommandState) -> Void

    package init(_ handler: @escaping @Sendable (Operation, CommandState) -> Void) { self.handler = handler }

    func ended(_ command: Operation, _ state: CommandState) { handler(command, state) }
}

/// The display name of any operation: a command's `displayName`, else its `name`, else its type.
package func operationName(_ operation: Operation) -> String {
    (operation as? any CommandFace)?.displayName ?? operation.name ?? TypeNames.name(of: type(of: operation))
}
