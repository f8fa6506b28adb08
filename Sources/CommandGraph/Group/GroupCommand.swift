import CommandCore
import Foundation

/// A graph of commands that is itself one command: one thing to execute, observe, cancel, depend on
/// and nest (ProcedureKit's `GroupProcedure`).
///
/// ```swift
/// let group = GroupCommand(name: "login", children: [fetchToken, loadProfile, showHome])  // edges as usual
/// group.add(child: analytics)          // before or while it runs (from a child's run, say)
/// group.maxConcurrentChildren = 2      // default: no limit
/// group.execute { event in ... }       // value(outcome), then completed (or failed)
/// ```
///
/// **Running.** The group's run executes its children (commands; a plain `Operation` is added to an
/// engine queue), honouring their edges and ``maxConcurrentChildren`` (a child runs once every
/// dependency of it that is a child of the group ended, and while fewer than that many children
/// run). Children added while it runs join the run. Executing a child yourself before the group runs
/// takes it out of the group's hands (it runs once, and the group waits for its end).
///
/// **Ending.** The group ends when every child ended, then sends the ``Graph/Outcome`` (the
/// children's names by how they ended) and completes; if a child failed, it sends the outcome and
/// fails with a `CommandError` of code `childFailed` naming the first failed child (its error
/// as `underlying`). With ``ChildFailurePolicy/cancelSiblings`` the first failure cancels the other
/// children. Cancelled children alone do not fail the group (the outcome lists them). No child:
/// it completes at once.
///
/// **Cancel.** Cancelling the group cancels every child (each ends once); cancelling a child does
/// not cancel the group.
///
/// **Conditions and exclusivity.** The group's conditions are checked before its run, and its
/// categories are held for its whole run. A child in a category the group holds runs inside the
/// group's hold: exclusive with its siblings in that category, not with the group (no deadlock, at
/// any depth of nesting: a command runs inside the hold of its nearest ancestor holding the
/// category, whether or not the groups in between hold it).
///
/// **Where callbacks run.** The group watches its children's ends on the threads where they end
/// (never through a caller's context), so a caller may block its own thread until the group ends.
///
/// **Progress.** The group's `progress` has each child's progress as a child of weight 1 (unless
/// another graph or group counts that child already: a `Progress` has one parent), and one unit of
/// its own, completed when the group ends. The children's progress is made and adopted when the
/// group's own is first read (by you, or by a `Graph` or group holding this one), before, during or
/// after the run: a group nobody asks for progress makes no `Progress` per child. `GraphReport` draws
/// a group as a cluster of its children.
///
/// Events reach observers as for any command: on their context, in order.
public final class GroupCommand: Command<Graph.Outcome>, @unchecked Sendable {
    /// What the first failed child does to its siblings.
    public enum ChildFailurePolicy: Sendable, Equatable {
        /// Let every child end, then fail (the default).
        case waitForAll
        /// Cancel the other children at the first failure.
        case cancelSiblings
    }

    // `@unchecked Sendable`: every field is guarded by `book`'s lock.
    private let book: Locked<GroupState>

    /// Makes a group of `children` (their edges kept).
    public init(name: String? = nil, children: [Operation] = []) {
        book = Locked(GroupState(children: children))
        super.init()
        if let name { self.name = name }
        // Cancelled (or failed by a dependency) before it ran: its children are cancelled too.
        observeState(on: .immediate) { [weak self] state in
            guard state.isTerminal, let self, !self.book.withLock({ $0.running }) else { return }
            for child in self.children { child.cancel() }
        }
        // The children's progress is adopted when the group's own is first asked for (by you, or by a
        // graph or group that holds this one): a Progress per child cost about 3 us a child here.
        whenProgressMade { [weak self] progress in
            guard let self else { return }
            // Every child known now (one not prepared yet is adopted here or by `prepare`: once).
            for child in self.book.withLock({ $0.children }) { Self.adopt(child, into: progress) }
        }
    }

    /// Adds `child`'s progress to `progress` (the group's), unless another parent counts it already.
    private static func adopt(_ child: Operation, into progress: Progress) {
        if let command = child as? any CommandFace, let childProgress = command.progressForAdoption() {
            ProgressGuard.addChild(childProgress, to: progress, weight: 1)
        }
    }

    /// The children, in the order they were added.
    public var children: [Operation] { book.withLock { $0.children } }

    /// How many children may run at once; default: no limit (`Int.max`). Set before the group runs.
    /// A value below 1 is ignored (the limit stays what it was) with an `invalidArgument` diagnostic
    /// naming the group: 1 runs children one at a time, `Int.max` lifts the limit.
    public var maxConcurrentChildren: Int {
        get { book.withLock { $0.limit } }
        set {
            guard newValue >= 1 else {
                let kept = book.withLock { $0.limit }
                diagnose(
                    .invalidArgument,
                    "maxConcurrentChildren = \(newValue) is ignored (the limit stays \(kept == Int.max ? "none" : String(kept))): "
                        + "set 1 to run children one at a time, or Int.max for no limit.")
                return
            }
            book.withLock { $0.limit = newValue }
        }
    }

    /// What the first failed child does to its siblings; default ``ChildFailurePolicy/waitForAll``.
    public var childFailurePolicy: ChildFailurePolicy {
        get { book.withLock { $0.policy } }
        set { book.withLock { $0.policy = newValue } }
    }

    /// Adds `child`, before the group runs or while it runs (it joins the run). Once the group ended,
    /// the child is not added: a diagnostic names the group (and a cancelled group cancels it). A
    /// group being cancelled cancels the children that join it.
    public func add(child: Operation) {
        let outcome = book.withLock { state -> GroupState.Addition in state.add(child) }
        switch outcome {
        case .added: break
        case .addedWhileRunning(let cancelling):
            // A group being cancelled cancels what joins it.
            if cancelling { child.cancel() }
            pump()
        case .ended:
            // A cancelled group cancels what joins it, even late, so nothing waits for that child.
            if isCancelled { child.cancel() }
            diagnose(
                .alreadyFinished,
                "add(child: \(GroupState.name(child))) was called after the group ended; the child is not added (add children before the group ends)."
            )
        }
    }

    public override func run(_ result: CommandResult<Graph.Outcome>) -> (any Cancelable)? {
        let scopes = exclusivityScopes
        let watch = EndWatch { [self] child, state in childEnded(ObjectIdentifier(child), state) }
        let children = book.withLock { state -> [Operation] in
            state.result = result
            state.scopes = scopes
            state.endWatch = watch
            state.running = true
            return state.children
        }
        for child in children { prepare(child) }
        pump()
        return BlockCancelable { [self] in cancelChildren() }
    }

    /// The categories a child's request is scoped to: the group's own categories (held by this group)
    /// over those the group itself runs inside.
    private var exclusivityScopes: [String: ObjectIdentifier] {
        var scopes = categoryScopes
        for category in mutuallyExclusiveCategories { scopes[category] = ObjectIdentifier(self) }
        return scopes
    }

    /// Scopes a child's categories to the group, counts its progress in the group's once that exists,
    /// and observes its end (once, when it joins the run).
    private func prepare(_ child: Operation) {
        let (scopes, watch) = book.withLock { ($0.scopes, $0.endWatch) }
        let id = ObjectIdentifier(child)
        if let command = child as? any CommandFace {
            command.scopeCategories(scopes)
            // Once the group's progress exists (else `whenProgressMade` adopts it with the others).
            if hasProgress { Self.adopt(child, into: progress) }
            if let watch { command.watchEnd(by: watch) }
        } else {
            PlainOperationWatcher.watch(child) { [self] in childEnded(id, GraphReport.plainState(child)) }
        }
    }

    /// Starts every child that may start now (its sibling dependencies ended, under the limit).
    private func pump() {
        while let (child, newlyAdded) = book.withLock({ $0.nextToStart() }) {
            if newlyAdded { prepare(child) }
            if let command = child as? any CommandFace {
                command.executeQuietly()
            } else {
                PlainOperationWatcher.start(child)
            }
        }
        finishIfDone()
    }

    private func childEnded(_ id: ObjectIdentifier, _ ending: CommandState) {
        let cancelSiblings = book.withLock { $0.ended(id, ending) }
        if cancelSiblings { cancelChildren() }
        pump()
    }

    private func finishIfDone() {
        guard let (result, outcome, firstFailure) = book.withLock({ $0.finish(groupName: displayName) }) else {
            return
        }
        result.send(outcome)
        if let (name, error) = firstFailure {
            result.fail(
                CommandError(
                    code: .childFailed, command: displayName,
                    message:
                        "'\(displayName)' failed because its child '\(name)' failed (\(error)); the outcome lists every child. "
                        + "Fix or recover the child (catch/retry) to let the group complete.",
                    dependency: name, underlying: error))
        } else {
            result.complete()
        }
    }

    private func cancelChildren() {
        let children = book.withLock { state -> [Operation] in
            state.cancelling = true
            return state.children
        }
        for child in children { child.cancel() }
        // Children not started yet end by their cancel; start them so they finish (and are counted).
        pump()
    }
}

/// The group's bookkeeping: children, which started and ended, what to send. A value type under the
/// group's lock.
struct GroupState {
    enum Addition { case added, addedWhileRunning(cancelling: Bool), ended }

    var children: [Operation]
    var ids: Set<ObjectIdentifier>
    var started: Set<ObjectIdentifier> = []
    /// Children added while the group runs, not prepared yet.
    var fresh: Set<ObjectIdentifier> = []
    var endings: [ObjectIdentifier: CommandState] = [:]
    var names: [ObjectIdentifier: String] = [:]
    var limit = Int.max
    var policy = GroupCommand.ChildFailurePolicy.waitForAll
    var running = false
    var cancelling = false
    var done = false
    var scopes: [String: ObjectIdentifier] = [:]
    /// Told when each child ends, while the group runs (it holds the group: let go when it finishes).
    var endWatch: EndWatch?
    var result: CommandResult<Graph.Outcome>?
    /// The first failed child: its name and error.
    var firstFailure: (String, any Error)?

    init(children: [Operation]) {
        var unique: [Operation] = []
        var ids = Set<ObjectIdentifier>()
        for child in children where ids.insert(ObjectIdentifier(child)).inserted { unique.append(child) }
        self.children = unique
        self.ids = ids
    }

    mutating func add(_ child: Operation) -> Addition {
        if done { return .ended }
        guard ids.insert(ObjectIdentifier(child)).inserted else { return .added }
        children.append(child)
        if running { fresh.insert(ObjectIdentifier(child)) }
        return running ? .addedWhileRunning(cancelling: cancelling) : .added
    }

    var inFlight: Int { started.count - endings.count }
    /// Children before this index were started or deferred.
    var cursor = 0
    /// Children passed over because a sibling they depend on had not ended (only with a limit).
    var deferred: [Operation] = []

    /// The next child to start, in the order added. Without a limit every child starts at once (the
    /// engine makes each wait for its dependencies). With one, a child starts once every dependency of
    /// it that is a child ended, while fewer than `limit` run. When cancelling, every child starts
    /// (so it ends). Amortised O(1) per child without a limit.
    mutating func nextToStart() -> (Operation, newlyAdded: Bool)? {
        guard running, !done else { return nil }
        let unlimited = limit == Int.max || cancelling
        if !unlimited {
            guard inFlight < limit else { return nil }
            if let index = deferred.firstIndex(where: { !waitsForASibling($0) }) {
                return take(deferred.remove(at: index))
            }
        } else if !deferred.isEmpty {
            return take(deferred.removeFirst())
        }
        while cursor < children.count {
            let child = children[cursor]
            cursor += 1
            if started.contains(ObjectIdentifier(child)) { continue }
            if !unlimited && waitsForASibling(child) {
                deferred.append(child)
                continue
            }
            return take(child)
        }
        return nil
    }

    private func waitsForASibling(_ child: Operation) -> Bool {
        child.dependencies.contains { ids.contains(ObjectIdentifier($0)) && endings[ObjectIdentifier($0)] == nil }
    }

    private mutating func take(_ child: Operation) -> (Operation, newlyAdded: Bool)? {
        let id = ObjectIdentifier(child)
        if started.contains(id) { return nextToStart() }
        started.insert(id)
        return (child, fresh.remove(id) != nil)
    }

    /// A child ended; whether to cancel its siblings now.
    mutating func ended(_ id: ObjectIdentifier, _ state: CommandState) -> Bool {
        guard ids.contains(id), endings[id] == nil else { return false }
        endings[id] = state
        if !started.contains(id) { started.insert(id) }  // ended before the group started it
        if case .failed(let error) = state, firstFailure == nil {
            let name = children.first { ObjectIdentifier($0) == id }.map(Self.name) ?? "child"
            firstFailure = (name, error)
            return policy == .cancelSiblings && !cancelling
        }
        return false
    }

    /// Every child ended: the result, outcome and first failure to report (once).
    mutating func finish(groupName: String) -> (CommandResult<Graph.Outcome>, Graph.Outcome, (String, any Error)?)? {
        guard running, !done, endings.count == children.count, let result else { return nil }
        done = true
        self.result = nil
        endWatch = nil
        var completed: [String] = [], failed: [String] = [], cancelled: [String] = []
        for child in children {
            let name = Self.name(child)
            switch endings[ObjectIdentifier(child)] {
            case .completed: completed.append(name)
            case .failed: failed.append(name)
            case .cancelled: cancelled.append(name)
            default: break
            }
        }
        return (result, Graph.Outcome(completed: completed, failed: failed, cancelled: cancelled), firstFailure)
    }

    static func name(_ child: Operation) -> String { operationName(child) }
}
