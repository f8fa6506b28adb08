import CommandCore
import Foundation

/// An explicit graph of commands for `addDependency`-style workflows, run, observed, cancelled and
/// awaited as a unit. (Named `Graph` because the module is `CommandGraph`.)
///
/// ```swift
/// let graph = Graph()
/// try graph.add(fetch)
/// try graph.add(parse, dependsOn: [fetch])         // a cycle or a late edge throws, naming it
/// try graph.add(save, dependsOn: [parse], weight: 5)
/// try graph.run { event in print(event.name, event.state) }
/// let outcome = await graph.outcome                 // or graph.whenFinished { outcome in ... }
/// ```
///
/// Nodes keep the `dependencies` they were given (a graph also works with edges made by
/// `addDependency` directly). `run` executes every command, in the order they were added (or the
/// `targets` given and what they depend on). Per-node events (each node's state changes)
/// arrive on the captured context (see `CallbackContext`), in order per node, when `run` is given a
/// handler. The graph's completion (``outcome``, ``whenFinished(_:)``) is counted on the threads where
/// the commands ended, never through the caller's context. `cancel()` cancels every command of the
/// graph. ``progress`` counts ended commands, weighted.
public final class Graph: Sendable {
    /// One node's state change.
    public struct Event: Sendable {
        /// The command's name.
        public let name: String
        /// The command itself.
        public let command: Operation
        /// Its new state.
        public let state: CommandState
    }

    /// How the graph ended.
    public struct Outcome: Sendable {
        /// The names of the commands that completed, failed and were cancelled.
        public let completed: [String]
        public let failed: [String]
        public let cancelled: [String]
        /// True when every command completed.
        public var succeeded: Bool { failed.isEmpty && cancelled.isEmpty }
    }

    /// A command of the graph: 8 bytes, its non-generic half (16 as a `CommandFace` existential: 8 MiB
    /// more at a million nodes); its state is kept apart, in ``State/states``, so the node table is
    /// never written once the graph runs and never copied by a node's end; its weight too, in
    /// ``State/weights``, only when it is not 1.
    private struct Node {
        /// The command, whatever its output type.
        let member: CommandNode
        /// The same command as an `Operation`.
        var command: Operation { member }
        /// The command's name now (read when needed: a type name costs a lookup).
        var name: String { member.displayName }
    }

    private struct State {
        var nodes: [Node] = []
        /// Each node's state as the graph counted it (by offset in `nodes`).
        var states: [CommandState] = []
        /// The weights that are not 1, by offset in `nodes` (most graphs have none).
        var weights: [Int32: Int64] = [:]
        var index = NodeIndex()
        var started = false
        var ended = 0
        /// How many commands the run involves (all, or those the targets need).
        var expected = 0
        var waiters: [CheckedContinuation<Outcome, Never>] = []
        var callbacks: [@Sendable (Outcome) -> Void] = []
        /// Made on the first read of ``progress``.
        var progress: Progress?
        var isFinished: Bool { started && ended == expected }

        /// The offset of `command`'s node, if it is in the graph.
        func offset(of command: ObjectIdentifier) -> Int? { Self.offset(of: command, in: nodes, index) }

        /// The offset of `command`'s node in `nodes`, which `index` indexes.
        static func offset(of command: ObjectIdentifier, in nodes: [Node], _ index: NodeIndex) -> Int? {
            index.offset(of: command) { ObjectIdentifier(nodes[$0].member) }
        }

        /// Appends `node` with `weight`.
        mutating func append(_ node: Node, weight: Int64) {
            if weight != 1 { weights[Int32(nodes.count)] = weight }
            nodes.append(node)
            states.append(.pending)
            // Read through a second reference to the same table (no copy: nothing writes it meanwhile),
            // not through `self`, which the index's append has open for writing.
            let table = nodes
            index.append(ObjectIdentifier(node.member)) { ObjectIdentifier(table[$0].member) }
        }

        func weight(at offset: Int) -> Int64 { weights[Int32(offset)] ?? 1 }
    }

    // Guards the node table, the run flag, the waiters and the progress once made.
    private let state = Locked(State())

    /// The graph's progress: each command's progress as a child, weighted (each node's `weight`,
    /// default 1), so a command reporting half its work moves the graph by half its weight. On Linux,
    /// read it through ``fractionCompleted`` (Foundation's `Progress` is not thread-safe there).
    ///
    /// Made on its first read, with every command added so far as a child (commands added later join
    /// it as they are added): a graph nobody asks for progress makes no `Progress` per command (about
    /// 3 us a node here). A command's progress has one parent: the first graph or group to make its
    /// progress tree with it counts it.
    public var progress: Progress {
        if let made = state.withLock({ $0.progress }) { return made }
        let made = Progress.discreteProgress(totalUnitCount: 0)
        let (winner, nodes, weights, finished) = state.withLock {
            state -> (Progress, [Node], [Int32: Int64], Bool) in
            if let existing = state.progress { return (existing, [], [:], false) }
            state.progress = made
            return (made, state.nodes, state.weights, state.isFinished)
        }
        for (offset, node) in nodes.enumerated() {
            if let child = node.member.face.progressForAdoption() {
                ProgressGuard.addChild(child, to: made, weight: weights[Int32(offset)] ?? 1)
            }
        }
        if finished { ProgressGuard.completeIfWeightless(made) }
        return winner
    }

    public init() {}

    /// The graph's progress as a fraction, read safely from any thread.
    public var fractionCompleted: Double { ProgressGuard.withLock { progress.fractionCompleted } }

    /// Adds `command`, depending on `dependencies` (commands of the graph or not), with `weight` units
    /// of the graph's ``progress``. Throws a `CommandError` for a self-dependency, an edge closing a
    /// cycle (named in order), an edge to a command already handed to its queue, a negative weight, or
    /// a graph already run.
    ///
    /// Adding a command that is already in the graph adds the edges given and nothing else (one
    /// node, its progress counted once); it throws, adding nothing, if `weight` differs from the
    /// first add's. A weight of 0 keeps the command out of the graph's progress (it still runs and
    /// counts in ``Outcome``); a graph whose weights are all 0 shows its progress complete once it
    /// finished. A command whose progress another graph or a group already counts (a `Progress` has
    /// one parent) runs as usual but counts in that one's progress only.
    @discardableResult
    public func add<Output>(
        _ command: Command<Output>, dependsOn dependencies: [Operation] = [], weight: Int64 = 1
    ) throws -> Command<Output> {
        let id = ObjectIdentifier(command)
        guard weight >= 0 else { throw Self.negativeWeight(command.displayName, weight) }
        // The name is read outside the graph's lock (it takes the command's), and only for an error.
        let (started, firstWeight) = state.withLock { state -> (Bool, Int64?) in
            (state.started, state.offset(of: id).map { state.weight(at: $0) })
        }
        if started { throw Self.alreadyRun(command.displayName) }
        if let firstWeight, firstWeight != weight {
            throw Self.otherWeight(command.displayName, weight, first: firstWeight)
        }
        try command.depend(on: dependencies)
        let node = Node(member: command)
        let (added, progress) = try state.withLock { state -> (Bool, Progress?) in
            if state.started { throw Self.alreadyRun(command.displayName) }
            // Already there (added before, or by another thread meanwhile): the edges were the point.
            guard state.offset(of: id) == nil else { return (false, nil) }
            state.append(node, weight: weight)
            return (true, state.progress)
        }
        // A command already counted by another graph or group counts there only (one parent).
        if added, let progress, let child = command.progressForAdoption() {
            ProgressGuard.addChild(child, to: progress, weight: weight)
        }
        return command
    }

    /// The commands of the graph, in the order they were added.
    public var commands: [Operation] { state.withLock { $0.nodes.map(\.command) } }

    /// Runs the graph: executes every command of the graph, in the order they were added (or, with
    /// `targets`, the targets first, then every command they depend on). Executing a command executes
    /// its dependencies first, as always, so the order of the `add` calls never changes the order
    /// the edges impose; a command's dependencies added before it are executed already when it is, so each
    /// execute walks one command and its edges. Returns at once: each command is handed over as
    /// any executed command is (through admission, to its own queue; its `run` is never called inside
    /// this call, on the caller's thread). `onEvent` gets each node's state changes on `context`
    /// (default: the caller's), in order per node. Throws if the graph was already run.
    ///
    /// The graph counts its commands' ends on the threads where they ended, not on `context`:
    /// ``outcome`` and ``whenFinished(_:)`` never wait for the caller's queue, so a caller may block
    /// its own thread until the outcome (a command-line tool, a test). They do not wait for `onEvent`
    /// either: the last events may reach `onEvent` on `context` after the outcome is known.
    public func run(
        targets: [Operation]? = nil, on context: CallbackContext? = nil,
        _ onEvent: (@Sendable (Event) -> Void)? = nil
    ) throws {
        let context = context ?? .current
        // The node table and its index, not the states (which the nodes' ends write meanwhile: a
        // reference held here would make the first of them copy the whole array).
        let (nodes, index) = state.withLock { ($0.nodes, $0.index) }
        // The nodes this run involves (nil: every node) and, with targets, the targets (handed over
        // first): the targets and every node they depend on.
        let involved: [Bool]?
        var roots: [Bool] = []
        if let targets {
            roots = [Bool](repeating: false, count: nodes.count)
            var reached = Set<ObjectIdentifier>()
            var stack: [Operation] = targets
            for target in targets {
                if let offset = State.offset(of: ObjectIdentifier(target), in: nodes, index) { roots[offset] = true }
            }
            while let command = stack.popLast() {
                if reached.insert(ObjectIdentifier(command)).inserted { stack += command.dependencies }
            }
            involved = nodes.map { reached.contains(ObjectIdentifier($0.command)) }
        } else {
            involved = nil
        }
        let expected = involved.map { $0.reduce(0) { $0 + ($1 ? 1 : 0) } } ?? nodes.count
        try state.withLock { state in
            if state.started { throw Self.alreadyRun("graph") }
            state.started = true
            state.expected = expected
        }
        // The graph's own count runs where the command ended: it never waits for the caller's context
        // (which the caller may be blocking while it waits for the outcome). One watch for every node.
        let watch = EndWatch { [self] command, newState in ended(ObjectIdentifier(command), newState) }
        for (offset, node) in nodes.enumerated() where involved?[offset] ?? true {
            node.member.watchEnd(by: watch)
            if let onEvent {
                node.member.face.observeState(on: context) { newState in
                    onEvent(Event(name: node.name, command: node.command, state: newState))
                }
            }
        }
        // Handed over as a group hands over its children (`executeQuietly`): each command runs on its
        // own queue, through admission, never inside this call on the caller's thread. With targets,
        // the targets first, then every other command involved: executing a target executes its
        // dependencies, except through a target cancelled before the run (a cancelled command needs
        // nothing), whose dependencies would otherwise never run and the graph never finish. Then (and
        // without targets, only) in the order they were added: a command added after its dependencies
        // finds them executed already, so each execute walks one node and its edges, never the depth
        // of the graph (a million-deep chain's walk from its end held a stack of 16 bytes a command,
        // up to 38 with the copy made while it grew).
        for (offset, node) in nodes.enumerated() where !roots.isEmpty && roots[offset] {
            node.member.executeQuietly()
        }
        for (offset, node) in nodes.enumerated() where involved?[offset] ?? true { node.member.executeQuietly() }
        if nodes.isEmpty { finishIfDone() }
    }

    /// Cancels every command of the graph.
    public func cancel() {
        for command in commands { command.cancel() }
    }

    /// The graph's outcome, once every command of it ended: waits without blocking a thread.
    public var outcome: Outcome {
        get async {
            await withCheckedContinuation { continuation in
                let ended = state.withLock { state -> ([Node], [CommandState])? in
                    if state.isFinished { return (state.nodes, state.states) }
                    state.waiters.append(continuation)
                    return nil
                }
                if let (nodes, states) = ended { continuation.resume(returning: Self.makeOutcome(nodes, states)) }
            }
        }
    }

    /// Calls `completion` (on the thread that ended the last command) once every command ended.
    public func whenFinished(_ completion: @escaping @Sendable (Outcome) -> Void) {
        let ended = state.withLock { state -> ([Node], [CommandState])? in
            if state.isFinished { return (state.nodes, state.states) }
            state.callbacks.append(completion)
            return nil
        }
        if let (nodes, states) = ended { completion(Self.makeOutcome(nodes, states)) }
    }

    /// The commands still waiting and what for; see `GraphReport.stalls(_:)`.
    public var stallReport: String { GraphReport.stalls(commands) }

    private func ended(_ id: ObjectIdentifier, _ newState: CommandState) {
        state.withLock { state in
            guard let offset = state.offset(of: id), !state.states[offset].isTerminal else { return }
            state.states[offset] = newState
            state.ended += 1
        }
        finishIfDone()
    }

    private func finishIfDone() {
        if let progress = state.withLock({ $0.isFinished ? $0.progress : nil }) {
            ProgressGuard.completeIfWeightless(progress)
        }
        let (ended, waiters, callbacks) = state.withLock { state in
            guard state.isFinished, !state.waiters.isEmpty || !state.callbacks.isEmpty else {
                return (
                    nil as ([Node], [CommandState])?, [CheckedContinuation<Outcome, Never>](),
                    [@Sendable (Outcome) -> Void]()
                )
            }
            defer {
                state.waiters = []
                state.callbacks = []
            }
            return ((state.nodes, state.states), state.waiters, state.callbacks)
        }
        guard let (nodes, states) = ended else { return }
        // Names are read outside the graph's lock (each takes its command's).
        let outcome = Self.makeOutcome(nodes, states)
        for waiter in waiters { waiter.resume(returning: outcome) }
        for callback in callbacks { callback(outcome) }
    }

    private static func makeOutcome(_ nodes: [Node], _ states: [CommandState]) -> Outcome {
        // Counted first: each list made at its size (grown by appending, the names of a million
        // commands took twice their bytes while the last copy was made, with every command alive).
        var counts = (completed: 0, failed: 0, cancelled: 0)
        for state in states {
            switch state {
            case .completed: counts.completed += 1
            case .failed: counts.failed += 1
            case .cancelled: counts.cancelled += 1
            case .pending, .executing: break
            }
        }
        var completed: [String] = [], failed: [String] = [], cancelled: [String] = []
        completed.reserveCapacity(counts.completed)
        failed.reserveCapacity(counts.failed)
        cancelled.reserveCapacity(counts.cancelled)
        for (node, state) in zip(nodes, states) {
            switch state {
            case .completed: completed.append(node.name)
            case .failed: failed.append(node.name)
            case .cancelled: cancelled.append(node.name)
            case .pending, .executing: break  // not involved in this run
            }
        }
        return Outcome(completed: completed, failed: failed, cancelled: cancelled)
    }

    private static func otherWeight(_ name: String, _ weight: Int64, first: Int64) -> CommandError {
        CommandError(
            code: .invalidArgument, command: name,
            message: "'\(name)' is already in this graph with weight \(first), and was added again with "
                + "weight \(weight). A command has one weight: add it again with the same weight (or none) "
                + "to give it more dependencies.")
    }

    private static func negativeWeight(_ name: String, _ weight: Int64) -> CommandError {
        CommandError(
            code: .invalidArgument, command: name,
            message: "'\(name)' was added with weight \(weight); a weight is 0 or more "
                + "(its share of the graph's progress; 0 keeps it out of the progress).")
    }

    private static func alreadyRun(_ name: String) -> CommandError {
        CommandError(
            code: .changedAfterStart, command: name,
            message:
                "This graph was already run; a graph runs once. Build a new Graph with fresh commands to run again.")
    }
}
