import Foundation

/// A command's conditions and mutually exclusive categories, and how far the check before its run
/// got: the gate between "every dependency finished" and "handed to its queue". Part of the command's
/// state (nil for a command without conditions, which pays nothing), changed under its lock; a value
/// type, tested without threads.
///
/// ```
/// closed --dependencies finished--> injecting --applied--> evaluating --all true--> waitingForCategories --granted--> open
///                                        |   (no injection: straight to evaluating)  |                        |
///                                        +--throws / no value--> failed <--false / throw--+   (no categories)--> open
/// ```
///
/// Three stages, in order, each once: the injections (``Command/inject(from:_:)``: a dependency's value
/// handed to the command), then the conditions, then the mutually exclusive categories. An injection
/// that fails ends the command before any condition is evaluated.
///
/// Either path may open it: the engine (a command it executes becomes ready) or a queue of yours
/// (a command it holds has every dependency finished); whichever comes first opens it, the other
/// waits for it.
struct Gate: Sendable {
    enum Phase: Sendable, Equatable {
        case closed
        /// Applying the injections (the stage before the conditions).
        case injecting
        case evaluating
        case waitingForCategories
        case open
        case failed
    }

    /// What to do when the command's dependencies have finished.
    enum Arrival: Sendable, Equatable {
        /// The gate is open: go on.
        case pass
        /// The gate was closed and its checks begin now (injections, then conditions): run them.
        case evaluate
        /// Someone else is evaluating (or it failed): nothing to do now.
        case wait
    }

    /// The conditions, in the order added (see ``add(_:)``).
    private(set) var conditions: [any CommandCondition] = []
    /// The categories of every condition, sorted: read once, as each condition is added.
    private(set) var categories: [String] = []
    /// The conditions to evaluate: all but ``MutuallyExclusive`` (always true: only its category counts).
    private(set) var evaluated: [any CommandCondition] = []
    /// The first condition naming an empty category, if any.
    private(set) var emptyCategoryCondition: String?
    /// The `inject(from:_:)` calls, applied (and dropped) when the evaluation begins.
    var injections: [Injection] = []
    private(set) var phase = Phase.closed
    /// The engine made the command ready while the gate was not open: continue its hand-over when it
    /// opens.
    private(set) var engineWaiting = false
    /// That hand-over continues the work of the dependency that made it ready (its lane, see
    /// `QueuePool`): kept for the hand-over when the gate opens, on whatever thread that is.
    var engineLane = false
    /// The evaluation under way, to cancel.
    var evaluation: GateEvaluation?
    /// The exclusivity ticket, waiting in line or holding.
    var ticket: UInt64?

    /// Adds a ``MutuallyExclusive`` condition: its category only (it is always true: never evaluated).
    mutating func add(_ exclusive: MutuallyExclusive) {
        // Room for 4 at the first: a command with two or three categories grew each array twice.
        if conditions.isEmpty { conditions.reserveCapacity(4) }
        conditions.append(exclusive)
        let category = exclusive.category
        if categories.isEmpty {
            categories.reserveCapacity(4)
            categories.append(category)
        } else if !categories.contains(category) {
            categories.insert(category, at: categories.firstIndex { $0 > category } ?? categories.endIndex)
        }
        if category.isEmpty, emptyCategoryCondition == nil { emptyCategoryCondition = exclusive.name }
    }

    /// Adds `condition`, whose categories (read once, by the caller) are `own`.
    mutating func add(_ condition: any CommandCondition, categories own: Set<String>) {
        conditions.append(condition)
        if categories.isEmpty && own.count == 1 {
            categories = [own.first!]
        } else if !own.isEmpty {
            categories = Set(categories).union(own).sorted()
        }
        if own.contains(""), emptyCategoryCondition == nil { emptyCategoryCondition = condition.name }
        if !(condition is MutuallyExclusive) { evaluated.append(condition) }
    }

    /// The keys to ask ``Exclusivity`` for, each category inside the hold `scopes` names for it (the
    /// nearest ancestor group holding it), or process-wide.
    func keys(in scopes: [String: ObjectIdentifier]) -> [ExclusivityBook.Key] {
        categories.map { ExclusivityBook.Key(category: $0, scope: scopes.isEmpty ? nil : scopes[$0]) }
    }

    /// The dependencies finished; `engine`: the engine made the command ready (else a queue of yours
    /// asked for `isReady`).
    mutating func arrive(engine: Bool) -> Arrival {
        switch phase {
        case .open:
            return .pass
        case .closed:
            phase = injections.isEmpty ? .evaluating : .injecting
            if engine { engineWaiting = true }
            return .evaluate
        case .injecting, .evaluating, .waitingForCategories:
            if engine { engineWaiting = true }
            return .wait
        case .failed:
            return .wait
        }
    }

    /// Every condition was true: wait for the categories, or open if there are none. False if the
    /// gate was not evaluating (the command ended meanwhile).
    mutating func conditionsPassed() -> Bool {
        guard phase == .evaluating else { return false }
        evaluation = nil
        phase = categories.isEmpty ? .open : .waitingForCategories
        return true
    }

    /// The categories were granted with `ticket`: open. False if the command ended meanwhile (the
    /// caller leaves the ticket).
    mutating func granted(_ ticket: UInt64) -> Bool {
        guard phase == .waitingForCategories else { return false }
        self.ticket = ticket
        phase = .open
        return true
    }

    /// Opened: whether the engine's hand-over waits for it, and whether on its dependency's lane
    /// (both cleared).
    mutating func takeEngineWaiting() -> (waiting: Bool, lane: Bool) {
        defer {
            engineWaiting = false
            engineLane = false
        }
        return (engineWaiting, engineLane)
    }

    /// The injections to apply now (the injecting stage), handed over once; the conditions come next.
    mutating func takeInjections() -> [Injection] {
        guard phase == .injecting else { return [] }
        phase = .evaluating
        defer { injections = [] }
        return injections
    }

    /// An injection or a condition failed: false if the gate was not checking.
    mutating func failed() -> Bool {
        guard phase == .injecting || phase == .evaluating else { return false }
        phase = .failed
        evaluation = nil
        return true
    }

    /// The command ended (any way): what to undo, once the lock is released.
    mutating func end() -> GateCleanup {
        let cleanup = GateCleanup(evaluation: evaluation, ticket: ticket, injections: injections)
        injections = []
        evaluation = nil
        ticket = nil
        if phase != .open { phase = .failed }
        return cleanup
    }
}

/// What a command's ending undoes of its gate: an evaluation to cancel, categories to release (or a
/// place in line to leave), injections never applied (dropped with it, outside the command's lock:
/// they hold their dependencies).
struct GateCleanup: Sendable {
    let evaluation: GateEvaluation?
    let ticket: UInt64?
    let injections: [Injection]

    /// Cancels the evaluation, if one runs: as the command ends, before anything is told.
    func cancelEvaluation() { evaluation?.cancel() }

    /// Releases the categories (or leaves the line), once the command's queue went back to the pool:
    /// the first command granted because of it continues on a lane (`lane`: the ending happens on the
    /// thread it ran on), usually the very lane this command is returning on (see `QueuePool`).
    func release(lane: Bool) {
        if let ticket { Exclusivity.leave(ticket, lane: lane) }
    }
}

/// One evaluation of a command's conditions, all at once: each condition's dependency, then its
/// `evaluate` in a task. The first false or throwing condition ends it (the others' tasks and
/// unfinished dependencies are cancelled); so does a cancel of the command.
final class GateEvaluation: Sendable {
    /// How a condition ended.
    enum Verdict: Sendable {
        case passed
        case failed(condition: String, error: (any Error)?)
        /// An ``IgnoredCondition`` was false: the command completes without running.
        case ignored(condition: String)
    }

    private struct State {
        var remaining: Int
        var done = false
        var tasks: [Task<Void, Never>] = []
        var dependencies: [Operation] = []
    }

    // Guards the count, the done flag, and what to cancel.
    private let state: Locked<State>
    /// Told once: all passed, or the first failure.
    private let finish: @Sendable (Verdict) -> Void

    init(count: Int, finish: @escaping @Sendable (Verdict) -> Void) {
        state = Locked(State(remaining: count))
        self.finish = finish
    }

    /// Evaluates `condition` for `command`: its dependency first (unless none), then `evaluate`.
    func start(_ condition: any CommandCondition, for command: Operation) {
        if let dependency = condition.dependency(for: command) {
            let runs = state.withLock { state -> Bool in
                if state.done { return false }
                state.dependencies.append(dependency)
                return true
            }
            guard runs else { return }
            ConditionDependencies.run(dependency) { [self] in evaluate(condition, for: command) }
        } else {
            evaluate(condition, for: command)
        }
    }

    private func evaluate(_ condition: any CommandCondition, for command: Operation) {
        // Holds the command weakly: a cancel ends the command, and the evaluation with it.
        let box = Weak<Operation>(command)
        let task = Task { [self] in
            guard let command = box.object else { return }
            let verdict: Verdict
            do {
                verdict =
                    try await condition.evaluate(for: command)
                    ? .passed : .failed(condition: condition.name, error: nil)
            } catch let ignored as ConditionIgnored {
                verdict = .ignored(condition: ignored.condition)
            } catch {
                verdict = .failed(condition: condition.name, error: error)
            }
            report(verdict)
        }
        let cancelled = state.withLock { state -> Bool in
            if state.done { return true }
            state.tasks.append(task)
            return false
        }
        if cancelled { task.cancel() }
    }

    private func report(_ verdict: Verdict) {
        let outcome = state.withLock { state -> (Verdict, [Task<Void, Never>], [Operation])? in
            if state.done { return nil }
            switch verdict {
            case .passed:
                state.remaining -= 1
                guard state.remaining == 0 else { return nil }
                state.done = true
                return (verdict, [], [])
            case .failed, .ignored:
                state.done = true
                defer {
                    state.tasks = []
                    state.dependencies = []
                }
                return (verdict, state.tasks, state.dependencies)
            }
        }
        guard let (verdict, tasks, dependencies) = outcome else { return }
        for task in tasks { task.cancel() }
        for dependency in dependencies where !dependency.isFinished { dependency.cancel() }
        finish(verdict)
    }

    /// The command ended first: cancel every task and unfinished dependency; `finish` is not called.
    func cancel() {
        let (tasks, dependencies) = state.withLock { state -> ([Task<Void, Never>], [Operation]) in
            if state.done { return ([], []) }
            state.done = true
            defer {
                state.tasks = []
                state.dependencies = []
            }
            return (state.tasks, state.dependencies)
        }
        for task in tasks { task.cancel() }
        for dependency in dependencies where !dependency.isFinished { dependency.cancel() }
    }
}

/// Runs a condition's dependency: a command is executed, a plain operation started by
/// ``PlainOperationWatcher`` (unless it already runs or finished); `then` is called once it finished,
/// however it ended.
enum ConditionDependencies {
    static func run(_ dependency: Operation, then: @escaping @Sendable () -> Void) {
        if let command = dependency as? any CommandFace {
            command.observeEnd { _ in then() }
            command.executeQuietly()
            return
        }
        PlainOperationWatcher.watch(dependency, finished: then)
        PlainOperationWatcher.start(dependency)
    }
}
