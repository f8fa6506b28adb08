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
/// let outcome = await graph.finished                // or graph.whenFinished { outcome in ... }
/// ```
///
/// Nodes keep the `dependencies` they were given (a graph also works with edges made by
/// `addDependency` directly). `run` executes the commands no other command of the graph depends on
/// (or the `targets` given), which executes the rest. Per-node events (each node's state changes)
/// arrive on the captured context (see `CallbackContext`), in order per node. `cancel()` cancels
/// every command of the graph. ``progress`` counts ended commands, weighted.
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

    private struct Node {
        let command: Operation
        let name: String
        let weight: Int64
        let observe: @Sendable (CallbackContext?, @escaping @Sendable (CommandState) -> Void) -> Void
        let execute: @Sendable () -> Void
        var state: CommandState = .pending
    }

    private struct State {
        var nodes: [Node] = []
        var index: [ObjectIdentifier: Int] = [:]
        var started = false
        var ended = 0
        /// How many commands the run involves (all, or those the targets need).
        var expected = 0
        var waiters: [CheckedContinuation<Outcome, Never>] = []
        var callbacks: [@Sendable (Outcome) -> Void] = []
    }

    // Guards the node table, the run flag and the waiters.
    private let state = Locked(State())

    /// The graph's progress: each command's progress as a child, weighted (each node's `weight`,
    /// default 1), so a command reporting half its work moves the graph by half its weight. On Linux,
    /// read it through ``fractionCompleted`` (Foundation's `Progress` is not thread-safe there).
    public let progress = Progress.discreteProgress(totalUnitCount: 0)

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
        let name = command.displayName
        let id = ObjectIdentifier(command)
        guard weight >= 0 else { throw Self.negativeWeight(name, weight) }
        try state.withLock { state in
            if state.started { throw Self.alreadyRun(name) }
            if let index = state.index[id], state.nodes[index].weight != weight {
                throw Self.otherWeight(name, weight, first: state.nodes[index].weight)
            }
        }
        for dependency in dependencies { try command.depend(on: dependency) }
        let node = Node(
            command: command, name: name, weight: weight,
            observe: { context, handler in command.observeState(on: context, handler) },
            execute: { command.start() })
        let added = try state.withLock { state -> Bool in
            if state.started { throw Self.alreadyRun(name) }
            // Already there (added before, or by another thread meanwhile): the edges were the point.
            guard state.index[id] == nil else { return false }
            state.index[id] = state.nodes.count
            state.nodes.append(node)
            return true
        }
        // A command already counted by another graph or group counts there only (one parent).
        if added, let child = command.progressForAdoption() {
            ProgressGuard.addChild(child, to: progress, weight: weight)
        }
        return command
    }

    /// The commands of the graph, in the order they were added.
    public var commands: [Operation] { state.withLock { $0.nodes.map(\.command) } }

    /// Runs the graph: executes `targets` (default: every command no other command of the graph
    /// depends on), which executes their dependencies. `onEvent` gets each node's state changes on
    /// `context` (default: the caller's). Throws if the graph was already run.
    public func run(
        targets: [Operation]? = nil, on context: CallbackContext? = nil,
        _ onEvent: (@Sendable (Event) -> Void)? = nil
    ) throws {
        let context = context ?? .current
        let nodes = state.withLock { $0.nodes }
        let dependedOn = Set(nodes.flatMap { $0.command.dependencies.map(ObjectIdentifier.init) })
        let roots = targets.map { Set($0.map(ObjectIdentifier.init)) }
        // The commands this run involves: the roots and everything they depend on.
        var involved = Set<ObjectIdentifier>()
        var stack = nodes.map(\.command).filter {
            roots?.contains(ObjectIdentifier($0)) ?? !dependedOn.contains(ObjectIdentifier($0))
        }
        while let command = stack.popLast() {
            if involved.insert(ObjectIdentifier(command)).inserted { stack += command.dependencies }
        }
        try state.withLock { state in
            if state.started { throw Self.alreadyRun("graph") }
            state.started = true
            state.expected = state.nodes.filter { involved.contains(ObjectIdentifier($0.command)) }.count
        }
        for (offset, node) in nodes.enumerated() where involved.contains(ObjectIdentifier(node.command)) {
            node.observe(context) { [self] newState in
                onEvent?(Event(name: node.name, command: node.command, state: newState))
                if newState.isTerminal { ended(offset, newState) }
            }
        }
        // Targets first, then every other command involved: executing a target executes its
        // dependencies, except through a target cancelled before the run (a cancelled command needs
        // nothing), whose dependencies would otherwise never run and the graph never finish.
        for node in nodes
        where roots?.contains(ObjectIdentifier(node.command)) ?? !dependedOn.contains(ObjectIdentifier(node.command)) {
            node.execute()
        }
        for node in nodes where involved.contains(ObjectIdentifier(node.command)) { node.execute() }
        if nodes.isEmpty { finishIfDone() }
    }

    /// Cancels every command of the graph.
    public func cancel() {
        for command in commands { command.cancel() }
    }

    /// Waits, without blocking a thread, until every command of the graph ended.
    public var finished: Outcome {
        get async {
            await withCheckedContinuation { continuation in
                let outcome = state.withLock { state -> Outcome? in
                    if state.started && state.ended == state.expected { return Self.outcome(state.nodes) }
                    state.waiters.append(continuation)
                    return nil
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        }
    }

    /// Calls `completion` (on the thread that ended the last command) once every command ended.
    public func whenFinished(_ completion: @escaping @Sendable (Outcome) -> Void) {
        let outcome = state.withLock { state -> Outcome? in
            if state.started && state.ended == state.expected { return Self.outcome(state.nodes) }
            state.callbacks.append(completion)
            return nil
        }
        if let outcome { completion(outcome) }
    }

    /// The commands still waiting and what for; see `GraphReport.stalls(_:)`.
    public var stallReport: String { GraphReport.stalls(commands) }

    private func ended(_ offset: Int, _ newState: CommandState) {
        state.withLock { state in
            guard !state.nodes[offset].state.isTerminal else { return }
            state.nodes[offset].state = newState
            state.ended += 1
        }
        finishIfDone()
    }

    private func finishIfDone() {
        if state.withLock({ $0.started && $0.ended == $0.expected }) { ProgressGuard.completeIfWeightless(progress) }
        let (outcome, waiters, callbacks) = state.withLock { state in
            guard state.started, state.ended == state.expected, !state.waiters.isEmpty || !state.callbacks.isEmpty
            else { return (nil as Outcome?, [CheckedContinuation<Outcome, Never>](), [@Sendable (Outcome) -> Void]()) }
            defer {
                state.waiters = []
                state.callbacks = []
            }
            return (Self.outcome(state.nodes), state.waiters, state.callbacks)
        }
        guard let outcome else { return }
        for waiter in waiters { waiter.resume(returning: outcome) }
        for callback in callbacks { callback(outcome) }
    }

    private static func outcome(_ nodes: [Node]) -> Outcome {
        var completed: [String] = [], failed: [String] = [], cancelled: [String] = []
        for node in nodes {
            switch node.state {
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
            code: .alreadyFinished, command: name,
            message:
                "This graph was already run; a graph runs once. Build a new Graph with fresh commands to run again.")
    }
}
