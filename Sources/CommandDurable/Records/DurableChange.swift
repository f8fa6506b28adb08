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

    // Guards the observers, by identity (held weakly: a released observer is dropped).
    private let entries = Locked<[ObjectIdentifier: Entry]>([:])
    // Guards the change streams of this process, by token.
    private let streams = Locked<(next: Int, sinks: [Int: Sink])>((0, [:]))

    /// A stream's ends: each change, and the store's close.
    struct Sink: Sendable {
        let yield: @Sendable (DurableChange) -> Void
        let finish: @Sendable () -> Void
    }
    // Guards whether another process watches this store (this one's changes are then published), and
    // the changes waiting for the store's thread to publish them.
    private let publishing = Locked<(watched: Bool, pending: [DurableChange])>((false, []))
    // Guards what publishes a batch (set by the storage: a write on its thread).
    private let publisher = Locked<(@Sendable () -> Void)?>(nil)
    private let queue = DispatchQueue(label: "AwesomeCommand.DurableObservers")
    // Guards the store the observers are told of (set once it exists; weak: the store owns this).
    private let store = Locked<WeakStore>(WeakStore())

    private struct WeakStore {
        weak var store: DurableStore?
    }

    /// Whether nobody here hears of changes, and no other process watches: a change is then not even made.
    var isEmpty: Bool {
        entries.withLock { $0.isEmpty } && streams.withLock { $0.sinks.isEmpty }
            && !publishing.withLock { $0.watched }
    }

    var hasObservers: Bool { !entries.withLock { $0.isEmpty } }

    func attach(_ store: DurableStore) { self.store.withLock { $0.store = store } }

    func add(_ observer: any DurableObserver) {
        entries.withLock { $0[ObjectIdentifier(observer)] = Entry(observer: observer) }
    }

    func remove(_ observer: any DurableObserver) {
        _ = entries.withLock { $0.removeValue(forKey: ObjectIdentifier(observer)) }
    }

    /// Calls `sink` with every change from now on (on the observers' queue, in order), until the token is
    /// removed; returns the token and whether it is the first stream.
    func addStream(_ sink: Sink) -> (token: Int, first: Bool) {
        streams.withLock { streams in
            streams.next += 1
            streams.sinks[streams.next] = sink
            return (streams.next, streams.sinks.count == 1)
        }
    }

    /// Removes a stream; true when it was the last.
    func removeStream(_ token: Int) -> Bool {
        streams.withLock { streams in
            guard streams.sinks.removeValue(forKey: token) != nil else { return false }
            return streams.sinks.isEmpty
        }
    }

    var streamCount: Int { streams.withLock { $0.sinks.count } }

    /// Ends every stream (the store closed); true when there was one.
    func finishStreams() -> Bool {
        let sinks = streams.withLock { streams in
            defer { streams.sinks = [:] }
            return Array(streams.sinks.values)
        }
        for sink in sinks { sink.finish() }
        return !sinks.isEmpty
    }

    /// Whether another process watches (read once a second by the store).
    func setWatched(_ watched: Bool) { publishing.withLock { $0.watched = watched } }

    func setPublisher(_ publish: @escaping @Sendable () -> Void) { publisher.withLock { $0 = publish } }

    /// The changes waiting to be published, taken.
    func takePending() -> [DurableChange] {
        publishing.withLock { state in
            defer { state.pending = [] }
            return state.pending
        }
    }

    /// Tells every observer and stream of `change`, on the observers' queue; publishes it while another
    /// process watches. A change `heard` from another process (a run's end it announced) goes to the
    /// observers only: that process tells the streams.
    func emit(
        _ kind: DurableChange.Kind, workflow: String, run: String, step: String? = nil, attempt: Int? = nil,
        owner: String, duration: Duration? = nil, error: String? = nil, state: DurableRunState? = nil,
        context: [String: String]? = nil, queued: Duration? = nil, heard: Bool = false
    ) {
        guard !isEmpty else { return }
        let change = DurableChange(
            kind: kind, run: run, workflow: workflow, step: step, attempt: attempt, owner: owner, time: Date(),
            duration: duration, error: error, state: state, context: context, queued: queued)
        if !heard {
            let first = publishing.withLock { state -> Bool in
                guard state.watched else { return false }
                state.pending.append(change)
                return state.pending.count == 1
            }
            if first { publisher.withLock { $0 }?() }
        }
        queue.async { [self] in
            if let store = store.withLock({ $0.store }) {
                let observers = entries.withLock { entries in
                    entries = entries.filter { $0.value.observer != nil }
                    return entries.values.compactMap(\.observer)
                }
                for observer in observers { observer.store(store, observed: change) }
            }
            if !heard { deliver([change]) }
        }
    }

    /// Changes another process published: to this process's streams, in order.
    func received(_ changes: [DurableChange]) {
        guard !changes.isEmpty else { return }
        queue.async { [self] in deliver(changes) }
    }

    /// On the queue.
    private func deliver(_ changes: [DurableChange]) {
        let sinks = streams.withLock { Array($0.sinks.values) }
        for change in changes { for sink in sinks { sink.yield(change) } }
    }
}
