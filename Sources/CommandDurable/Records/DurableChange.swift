import CommandCore
import Dispatch
import Foundation

/// Something that happened to a run or one of its steps, as a ``DurableObserver`` hears of it and as
/// ``DurableStore/changes(_:)`` delivers it. Encoded as JSON by its field names (`duration` in seconds,
/// `time` in seconds since 1970): the command line's `watch --json` and the inspector's live updates.
public struct DurableChange: Sendable, Equatable, Codable, CustomStringConvertible {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// A run was recorded (started, enqueued, a schedule's slot, a child run).
        case runCreated
        /// An attempt of a step began (its command made, or its wait begun).
        case stepStarted
        case stepCompleted
        /// A step failed for good.
        case stepFailed
        /// A step's attempt failed and it will be tried again.
        case stepRetrying
        /// A step another owner held (its lease expired, or its process is gone) was taken over here.
        case stepTakenOver
        /// A run ended: completed, failed or cancelled (`state`).
        case runEnded
    }

    public let kind: Kind
    public let run: String
    /// The run's workflow (``DurableWorkflow/name``).
    public let workflow: String
    /// The step's id, for a step's change.
    public let step: String?
    /// The attempt, for a step's change.
    public let attempt: Int?
    /// The store that made the change (``DurableStore/owner``).
    public let owner: String
    public let time: Date
    /// How long the attempt ran, for `stepCompleted`, `stepFailed` and `stepRetrying`.
    public let duration: Duration?
    /// How long the step waited to begin, for the first `stepStarted` of a run's entry steps (those after
    /// no other): from the run's record to this start (a worker's backlog, a delayed start). Nil otherwise.
    public let queued: Duration?
    /// The error, for `stepFailed` and `stepRetrying`.
    public let error: String?
    /// The run's end, for `runEnded`.
    public let state: DurableRunState?
    /// What the run carries (``DurableRunOptions/context``: a trace's context), for `runCreated` and
    /// `stepStarted` (nil otherwise, and when it carries nothing).
    public let context: [String: String]?

    public init(
        kind: Kind, run: String, workflow: String, step: String? = nil, attempt: Int? = nil, owner: String,
        time: Date, duration: Duration? = nil, error: String? = nil, state: DurableRunState? = nil,
        context: [String: String]? = nil, queued: Duration? = nil
    ) {
        self.context = context.flatMap { $0.isEmpty ? nil : $0 }
        self.queued = queued
        self.kind = kind
        self.run = run
        self.workflow = workflow
        self.step = step
        self.attempt = attempt
        self.owner = owner
        self.time = time
        self.duration = duration
        self.error = error
        self.state = state
    }

    private enum CodingKeys: String, CodingKey {
        case kind, run, workflow, step, attempt, owner, time, duration, error, state, context, queued
    }

    public init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(
            kind: values.decode(Kind.self, forKey: .kind), run: values.decode(String.self, forKey: .run),
            workflow: values.decode(String.self, forKey: .workflow),
            step: values.decodeIfPresent(String.self, forKey: .step),
            attempt: values.decodeIfPresent(Int.self, forKey: .attempt),
            owner: values.decode(String.self, forKey: .owner),
            time: Date(timeIntervalSince1970: values.decode(Double.self, forKey: .time)),
            duration: values.decodeIfPresent(Double.self, forKey: .duration).map { Duration(clampingSeconds: $0) },
            error: values.decodeIfPresent(String.self, forKey: .error),
            state: values.decodeIfPresent(DurableRunState.self, forKey: .state),
            context: values.decodeIfPresent([String: String].self, forKey: .context),
            queued: values.decodeIfPresent(Double.self, forKey: .queued).map { Duration(clampingSeconds: $0) })
    }

    public func encode(to encoder: any Encoder) throws {
        var values = encoder.container(keyedBy: CodingKeys.self)
        try values.encode(kind, forKey: .kind)
        try values.encode(run, forKey: .run)
        try values.encode(workflow, forKey: .workflow)
        try values.encodeIfPresent(step, forKey: .step)
        try values.encodeIfPresent(attempt, forKey: .attempt)
        try values.encode(owner, forKey: .owner)
        try values.encode(time.timeIntervalSince1970, forKey: .time)
        try values.encodeIfPresent(duration?.inSeconds, forKey: .duration)
        try values.encodeIfPresent(error, forKey: .error)
        try values.encodeIfPresent(state, forKey: .state)
        try values.encodeIfPresent(context, forKey: .context)
        try values.encodeIfPresent(queued?.inSeconds, forKey: .queued)
    }

    public var description: String {
        var text = "\(kind.rawValue) \(run)"
        if let step { text += "/\(step)" }
        if let attempt { text += " #\(attempt)" }
        if let state { text += " \(state.rawValue)" }
        return text
    }
}

/// Hears of the changes of the runs of a store in this process (``DurableStore/add(observer:)``): the
/// runs this process records, the steps it runs, the ends of the runs it works or awaits. Held weakly.
///
/// **Threads and order.** Called on one serial queue of the store's (never its thread, never a lock held),
/// so one observer's calls never overlap and come in the order the changes were made here: a run's
/// `runCreated`, then each step's `stepStarted` before its end, then `runEnded`.
public protocol DurableObserver: AnyObject, Sendable {
    func store(_ store: DurableStore, observed change: DurableChange)
}

/// A store's observers and change streams, and the one serial queue that calls them; and what this
/// process publishes for the other processes' streams while one watches (``DurableStore/changes(_:)``).
final class DurableObservers: Sendable {
    private struct Entry {
        weak var observer: (any DurableObserver)?
    }

    /// A stream's ends: each change, and the store's close.
    struct Sink: Sendable {
        let yield: @Sendable (DurableChange) -> Void
        let finish: @Sendable () -> Void
    }

    private struct State {
        /// The observers, by identity (held weakly: a released observer is dropped).
        var entries: [ObjectIdentifier: Entry] = [:]
        /// The change streams of this process, by token.
        var sinks: [Int: Sink] = [:]
        var nextToken = 0
        /// Whether another process watches this store (this one's changes are then published).
        var watched = false
        /// The changes waiting for the store's thread to publish them.
        var pending: [DurableChange] = []
        /// What publishes a batch (set by the storage: a write on its thread).
        var publisher: (@Sendable () -> Void)?
        /// The store the observers are told of (set once it exists; weak: the store owns this).
        weak var store: DurableStore?

        var isEmpty: Bool { entries.isEmpty && sinks.isEmpty && !watched }
    }

    // Guards everything above: one lock a change (its emptiness check and, while watched, its place in
    // the batch to publish), one more on the observers' queue.
    private let state = Locked(State())
    private let queue = DispatchQueue(label: "AwesomeCommand.DurableObservers")

    /// Whether nobody here hears of changes, and no other process watches: a change is then not even made.
    var isEmpty: Bool { state.withLock { $0.isEmpty } }

    var hasObservers: Bool { !state.withLock { $0.entries.isEmpty } }

    func attach(_ store: DurableStore) { state.withLock { $0.store = store } }

    func add(_ observer: any DurableObserver) {
        state.withLock { $0.entries[ObjectIdentifier(observer)] = Entry(observer: observer) }
    }

    func remove(_ observer: any DurableObserver) {
        _ = state.withLock { $0.entries.removeValue(forKey: ObjectIdentifier(observer)) }
    }

    /// Calls `sink` with every change from now on (on the observers' queue, in order), until the token is
    /// removed; returns the token and whether it is the first stream.
    func addStream(_ sink: Sink) -> (token: Int, first: Bool) {
        state.withLock { state in
            state.nextToken += 1
            state.sinks[state.nextToken] = sink
            return (state.nextToken, state.sinks.count == 1)
        }
    }

    /// Removes a stream; true when it was the last.
    func removeStream(_ token: Int) -> Bool {
        state.withLock { state in
            guard state.sinks.removeValue(forKey: token) != nil else { return false }
            return state.sinks.isEmpty
        }
    }

    var streamCount: Int { state.withLock { $0.sinks.count } }

    /// Ends every stream (the store closed); true when there was one.
    func finishStreams() -> Bool {
        let sinks = state.withLock { state in
            defer { state.sinks = [:] }
            return Array(state.sinks.values)
        }
        for sink in sinks { sink.finish() }
        return !sinks.isEmpty
    }

    /// Whether another process watches (read once a second by the store).
    func setWatched(_ watched: Bool) { state.withLock { $0.watched = watched } }

    func setPublisher(_ publish: @escaping @Sendable () -> Void) { state.withLock { $0.publisher = publish } }

    /// The changes waiting to be published, taken.
    func takePending() -> [DurableChange] {
        state.withLock { state in
            defer { state.pending = [] }
            return state.pending
        }
    }

    /// Tells every observer and stream of `change`, on the observers' queue; publishes it while another
    /// process watches. A change `heard` from another process (a run's end it announced) goes to the
    /// observers only: that process tells the streams.
    func emit(
        _ kind: DurableChange.Kind, workflow: String, run: String, step: String? = nil, attempt: Int? = nil,
        owner: String, duration: Duration? = nil, error: String? = nil, state changeState: DurableRunState? = nil,
        context: [String: String]? = nil, queued: Duration? = nil, heard: Bool = false
    ) {
        // Made only once someone hears of it; placed in the batch to publish under the same lock.
        var change: DurableChange?
        let publish = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.isEmpty else { return nil }
            let made = DurableChange(
                kind: kind, run: run, workflow: workflow, step: step, attempt: attempt, owner: owner, time: Date(),
                duration: duration, error: error, state: changeState, context: context, queued: queued)
            change = made
            guard !heard, state.watched else { return nil }
            state.pending.append(made)
            return state.pending.count == 1 ? state.publisher : nil
        }
        guard let change else { return }
        publish?()
        queue.async { [self] in
            let (store, observers, sinks) = state.withLock { state in
                state.entries = state.entries.filter { $0.value.observer != nil }
                return (state.store, state.entries.values.compactMap(\.observer), Array(state.sinks.values))
            }
            if let store { for observer in observers { observer.store(store, observed: change) } }
            if !heard { for sink in sinks { sink.yield(change) } }
        }
    }

    /// Changes another process published: to this process's streams, in order.
    func received(_ changes: [DurableChange]) {
        guard !changes.isEmpty else { return }
        queue.async { [self] in
            let sinks = state.withLock { Array($0.sinks.values) }
            for change in changes { for sink in sinks { sink.yield(change) } }
        }
    }
}
