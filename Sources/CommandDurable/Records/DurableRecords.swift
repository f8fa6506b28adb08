import Foundation

/// Where a run, or a step, is.
public enum DurableRunState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Recorded, nothing run yet.
    case pending
    /// Running (or waiting to be resumed after its process died).
    case running
    case completed
    case failed
    case cancelled

    /// Completed, failed or cancelled.
    public var isEnded: Bool { self == .completed || self == .failed || self == .cancelled }
}

/// A step as the store recorded it.
public struct DurableStepRecord: Sendable, Equatable {
    public let id: String
    public let state: DurableRunState
    /// Attempts begun, across processes.
    public let attempts: Int
    /// The last failure, as `String(describing:)` of the error (its type beside it), if any.
    public let lastError: String?
    public let started: Date?
    public let ended: Date?
    /// When the next attempt may begin, while a retry waits out its backoff (recorded, so a process that
    /// resumes the run waits only the rest of it).
    public let nextAttempt: Date?
    /// The store that claimed it last, as `host/pid/id` (kept once it ended: who did it); nil before a
    /// claim and once cancelled.
    public let owner: String?
    /// Its recorded value, encoded (JSON), once completed; nil for a step without a value.
    public let value: Data?
    /// The ids of the steps it comes after (its edges in the run's graph).
    public var after: [String] = []
}

/// A run as the store recorded it.
public struct DurableRunRecord: Sendable, Equatable {
    public let id: String
    public let workflow: String
    public let state: DurableRunState
    public let created: Date
    public let updated: Date
    /// The run's steps, in the order `build` made them.
    public let steps: [DurableStepRecord]
    /// Why the run failed, if it did.
    public let error: String?
    /// Its input, encoded (JSON) as `start` or `enqueue` recorded it.
    public let input: Data?
    /// Its value, encoded (JSON): the final step's, once the run completed.
    public let output: Data?
    /// Its tags (``DurableRunOptions/tags``).
    public var tags: Set<String> = []
    /// Its priority (``DurableRunOptions/priority``).
    public var priority: Int = 0
    /// When its deadline passes, if it has one (``DurableRunOptions/deadline``, from its creation).
    public var deadline: Date?
    /// The date before which nothing of it begins, if one was given (``DurableRunOptions/notBefore``).
    public var notBefore: Date?
    /// For a child run (``DurableFlow/child(_:_:after:input:)``), its parent run's id.
    public var parent: String?
    /// What the run carries (``DurableRunOptions/context``).
    public var context: [String: String] = [:]
}

/// Which runs ``DurableStore/runs(_:)`` lists: every condition given holds (they combine), in the order
/// the runs were created (then by id), a page at a time.
///
/// ```swift
/// let page = try await store.runs(.init(workflow: "upload-photo", states: [.failed], limit: 50))
/// let next = try await store.runs(.init(workflow: "upload-photo", states: [.failed], limit: 50,
///                                       after: page.last?.id))
/// ```
public struct DurableRunFilter: Sendable, Equatable {
    /// Runs of this workflow only.
    public var workflow: String?
    /// Runs in one of these states only.
    public var states: Set<DurableRunState>?
    /// Runs created in this range (`created >= lowerBound && created < upperBound`).
    public var created: Range<Date>?
    /// Runs that ended in this range (ended runs only).
    public var ended: Range<Date>?
    /// At most this many runs (a page).
    public var limit: Int?
    /// The runs after this run id, in the listing's order (the next page: the last id of the page before).
    public var after: String?
    /// Runs with every one of these tags (``DurableRunOptions/tags``).
    public var tags: Set<String>?
    /// The runs of these ids only.
    public var ids: Set<String>?

    public init(
        workflow: String? = nil, states: Set<DurableRunState>? = nil, created: Range<Date>? = nil,
        ended: Range<Date>? = nil, limit: Int? = nil, after: String? = nil, tags: Set<String>? = nil,
        ids: Set<String>? = nil
    ) {
        self.ids = ids
        self.workflow = workflow
        self.states = states
        self.created = created
        self.ended = ended
        self.limit = limit
        self.after = after
        self.tags = tags
    }

    /// Every run.
    public static let all = DurableRunFilter()
    /// Runs not ended (pending or running).
    public static let unfinished = DurableRunFilter(states: [.pending, .running])
    /// Runs in `state`.
    public static func state(_ state: DurableRunState) -> DurableRunFilter { DurableRunFilter(states: [state]) }
    /// Runs of the workflow named `name`.
    public static func workflow(_ name: String) -> DurableRunFilter { DurableRunFilter(workflow: name) }
    /// The run of id `id` (none if the store has no such run).
    public static func run(_ id: String) -> DurableRunFilter { DurableRunFilter(ids: [id]) }
    /// Runs tagged `tag` (``DurableRunOptions/tags``).
    public static func tagged(_ tag: String) -> DurableRunFilter { DurableRunFilter(tags: [tag]) }
}

/// What ``DurableStore/resumeUnfinished()`` did.
public struct DurableResumeReport: Sendable {
    /// The ids of the runs resumed.
    public let resumed: [String]
    /// The runs left as they were, each with why.
    public let notResumed: [(run: String, reason: String)]
}

/// What `start` does with a run id the store already has.
public enum DurableIfExists: Sendable {
    /// Return that run (its value once it ended; it goes on if it had not).
    case keep
    /// Throw ``DurableError/runExists(_:)``.
    case fail
}

/// How hard a recorded step is held on to.
public enum DurableDurability: Sendable {
    /// A recorded step survives a power cut (`synchronous = FULL`: each commit waits for the disk).
    case full
    /// A recorded step survives a crash of the process, not of the machine (`synchronous = NORMAL`).
    case normal
}
