import Foundation

/// What Foundation and a user's `OperationQueue` see of a command: the four KVO-observable flags of an
/// asynchronous `Operation`, as last *published*, and the bookkeeping that decides `isReady` for a
/// queue that holds the command.
///
/// The command's lifecycle (``CommandStateMachine``) changes under the command's lock; these flags change
/// only inside ``Command``'s KVO helper, between `willChangeValue(forKey:)` and `didChangeValue(forKey:)`,
/// so an observer never sees a value change outside its pair. A value type, tested without threads.
struct OperationFace: Sendable {
    /// `isExecuting` as published.
    var executing = false
    /// `isFinished` as published: true once the command ended *and* something started it (its queue,
    /// `start()`, `execute`, or the engine running a graph).
    var finished = false
    /// `isCancelled` as published.
    var cancelled = false
    /// Every dependency has finished (commands: published `isFinished`), as published. Meaningful once
    /// `tracking` is `.on`.
    var dependenciesFinished = true
    /// Readiness is tracked only once someone asked for `isReady` (a queue does when the command is
    /// added to it): a graph the engine runs by itself never pays for it.
    var tracking = Tracking.off
    /// The command's conditions passed and its categories are held (true for a command without
    /// conditions): see ``Gate``. With the flags above, in the first word (32 bytes in all, not 33).
    var gateOpen = true

    enum Tracking: Sendable {
        /// Nobody asked: edges are only recorded.
        case off
        /// The first reader is registering with the dependencies; other readers get `false` and a
        /// KVO pair when it is done.
        case registering
        case on
    }
    /// Dependencies that have not finished yet (commands: not published `isFinished`).
    private(set) var unfinishedDependencies = 0
    /// Plain `Operation` dependencies being watched (counted in `unfinishedDependencies` too).
    private var plainWatched: Set<ObjectIdentifier> = []

    /// A plain dependency to watch: counted; false if it already is.
    mutating func addPlainDependency(_ id: ObjectIdentifier) -> Bool {
        guard plainWatched.insert(id).inserted else { return false }
        unfinishedDependencies += 1
        return true
    }

    /// A watched plain dependency finished or was removed; false if it was not watched any more.
    mutating func plainDependencyGone(_ id: ObjectIdentifier) -> Bool {
        guard plainWatched.remove(id) != nil else { return false }
        dependencyGone()
        return true
    }

    /// Dependents told when this command publishes `isFinished` (held weakly: a graph that is built and
    /// dropped without running must be freed).
    private var watchers: [WeakNode] = []

    /// `isReady` for the command part: a cancelled command is ready (Foundation's rule: a cancel
    /// breaks a wait); otherwise when every command dependency finished.
    var isReady: Bool { cancelled || (dependenciesFinished && gateOpen) }

    /// The value `dependenciesFinished` should be published with.
    var readinessTarget: Bool { unfinishedDependencies == 0 }

    /// A command dependency was added and is not finished.
    mutating func dependencyAdded() { unfinishedDependencies += 1 }

    /// A command dependency finished, was removed, or was found already finished.
    mutating func dependencyGone() {
        precondition(unfinishedDependencies > 0, "OperationFace: more dependencies finished than were added")
        unfinishedDependencies -= 1
    }

    /// Registers `node` to be told when this command publishes `isFinished`; false if it already did.
    mutating func addWatcher(_ node: CommandNode) -> Bool {
        if finished { return false }
        watchers.append(WeakNode(node))
        return true
    }

    /// Removes `node`; false if it was not waiting (this command finished and told it, or is telling it).
    mutating func removeWatcher(_ node: CommandNode) -> Bool {
        guard let index = watchers.firstIndex(where: { $0.node === node }) else { return false }
        watchers.remove(at: index)
        return true
    }

    /// The watchers to tell, once `finished` was published; empties the list.
    mutating func takeWatchers() -> [WeakNode] {
        defer { watchers = [] }
        return watchers
    }
}

/// A weak reference to a dependent waiting for a command's `isFinished`.
struct WeakNode: Sendable {
    weak var node: CommandNode?
    init(_ node: CommandNode) { self.node = node }
}

/// The KVO keys a command publishes, in the order their `willChangeValue` calls are made.
struct FaceKeys: OptionSet, Sendable {
    let rawValue: UInt8
    static let ready = FaceKeys(rawValue: 1)
    static let cancelled = FaceKeys(rawValue: 2)
    static let executing = FaceKeys(rawValue: 4)
    static let finished = FaceKeys(rawValue: 8)

    /// Calls `body` with each key's Foundation name, ready first and finished last (a queue reacts to
    /// `isFinished`, so every other flag is already published when it does), without making an array.
    @inline(__always)
    func forEachName(_ body: (String) -> Void) {
        if contains(.ready) { body("isReady") }
        if contains(.cancelled) { body("isCancelled") }
        if contains(.executing) { body("isExecuting") }
        if contains(.finished) { body("isFinished") }
    }
}
