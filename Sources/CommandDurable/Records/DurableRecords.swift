import Foundation

/// Where a run, or a step, is.
public enum DurableRunState: String, Sendable, Equatable, Codable {
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
}

/// Which runs ``DurableStore/runs(_:)`` lists.
public enum DurableRunFilter: Sendable, Equatable {
    case all
    /// Runs not ended (pending or running).
    case unfinished
    case state(DurableRunState)
    case workflow(String)
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
