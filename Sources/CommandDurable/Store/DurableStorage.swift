import Foundation

/// The storage interface the engine runs on: what a run and its steps need recorded and read. The
/// SQLite store implements it on its own thread; another store (a server database) implements the same
/// operations with the same rules. SQL and SQLite's types stay behind it.
///
/// Every completion is called once the operation committed (or failed): on a global Dispatch queue,
/// except those of `claim`, `complete` and `fail`, which are called on the store's own thread (the step
/// command's answers: it hands its dependents over from there, which runs no user code, and hops to a
/// global queue before it makes a step's command).
protocol DurableStorage: AnyObject, Sendable {
    /// This process's owner id in the store.
    var owner: String { get }
    /// The lease a claim holds, in seconds.
    var leaseSeconds: Double { get }

    /// Records a new run (its input and every step, pending) in one transaction, or finds the run with
    /// that id.
    func createRun(_ run: NewRun) async throws -> CreateRunResult
    /// Claims a step for this process (see ``ClaimResult``).
    func claim(
        run: String, step: String, position: Int,
        completion: @escaping @Sendable (Result<ClaimResult, any Error>) -> Void)
    /// Records a step completed with `value`, if this process's claim (`attempt`) still holds it, and
    /// claims for this process, in the same transaction, the steps of `next` (made ready by it) that are
    /// pending.
    func complete(
        run: String, step: String, attempt: Int, value: Data?, claiming next: [(step: String, position: Int)],
        completion: @escaping @Sendable (Result<CompleteResult, any Error>) -> Void)
    /// Records a failure of a claimed attempt: for good, or pending again at `retryAt`.
    func fail(
        run: String, step: String, attempt: Int, error: String, errorType: String, retryAt: Date?,
        completion: @escaping @Sendable (Result<Bool, any Error>) -> Void)
    /// Records how the run ended (unless it already had).
    func finishRun(
        run: String, state: DurableRunState, error: RecordedFailure?,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
    /// Records a cancel: the run ends cancelled and is never resumed; its owners stop its steps.
    func requestCancel(run: String) async throws -> Bool
    /// The run as recorded.
    func loadRun(_ id: String) async throws -> StoredRun?
    /// The runs not ended, found through an index.
    func unfinishedRuns() async throws -> [StoredRun]
    /// Records for the API.
    func records(_ filter: DurableRunFilter) async throws -> [DurableRunRecord]
    /// Deletes runs that ended before `date`; returns how many.
    func prune(endedBefore date: Date) async throws -> Int
    /// Of `runs`, those whose cancel was recorded (by any process).
    func cancelRequested(among runs: [String], completion: @escaping @Sendable ([String]) -> Void)
    /// The recorded value of a completed step.
    func stepValue(run: String, step: String, completion: @escaping @Sendable (Result<Data?, any Error>) -> Void)
    /// Records a cancel without waiting (from a command's cancel).
    func requestCancel(run: String, completion: @escaping @Sendable (Result<Bool, any Error>) -> Void)
    /// Commits made so far (group commit's figures).
    var commits: Int { get }
    /// Steps of unfinished runs of `workflows` that may be claimed now: every step they come after is
    /// recorded completed; pending (no backoff left) or running with an expired lease. Not those in
    /// `busy` ("run/step"), at most `limit`.
    func readySteps(
        workflows: [String], excluding busy: Set<String>, limit: Int,
        completion: @escaping @Sendable (Result<[ReadyStep], any Error>) -> Void)
    /// The recorded values of a run's completed steps at `positions`.
    func stepValues(
        run: String, positions: [Int], completion: @escaping @Sendable (Result<[Int: Data?], any Error>) -> Void)
    /// Of `runs`, those that ended, as recorded.
    func endedRuns(among runs: [String], completion: @escaping @Sendable (Result<[StoredRun], any Error>) -> Void)
    /// The run as recorded, without waiting.
    func runState(_ id: String, completion: @escaping @Sendable (Result<StoredRun?, any Error>) -> Void)
    /// Stops the store's thread.
    func close()
    /// What changed, told to this process's subscribers.
    var feed: ChangeFeed { get }
    /// Whether every process sharing the store is told (a server's notifications), not only this one:
    /// then polls are only a slow backstop.
    var notifiesEveryProcess: Bool { get }
}

extension DurableStorage {
    /// Records how the run ended, awaited.
    func finishRun(run: String, state: DurableRunState, error: RecordedFailure?) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            finishRun(run: run, state: state, error: error) { continuation.resume(with: $0) }
        }
    }

    /// How often a worker or an enqueued run looks at the store when nothing told it to: 50 ms when
    /// other processes' changes are not announced; otherwise a third of the lease (it finds steps whose
    /// lease expired), between 50 ms and 1 s.
    var backstop: Duration {
        notifiesEveryProcess ? Duration(clampingSeconds: min(max(leaseSeconds / 3, 0.05), 1)) : .milliseconds(50)
    }
}

/// A run to record.
struct NewRun: Sendable {
    let id: String
    let workflow: String
    let input: Data
    /// Step ids in the order `build` made them.
    let steps: [String]
    /// For each step, the positions of the steps it comes after.
    let after: [[Int]]
    let finalStep: String
}

/// A step a worker may claim.
struct ReadyStep: Sendable {
    let run: String
    let workflow: String
    let step: String
    let position: Int
}

enum CreateRunResult: Sendable {
    case created
    case exists(StoredRun)
}

/// A run as read back.
struct StoredRun: Sendable {
    let id: String
    let workflow: String
    let input: Data
    let state: DurableRunState
    let cancelRequested: Bool
    let failure: RecordedFailure?
    let finalStep: String
    /// Recorded step ids, in order.
    let steps: [String]
}

/// Why a run failed, as recorded: enough to throw the same `DurableError` again after a resume.
struct RecordedFailure: Sendable, Equatable {
    /// `stepFailed`, `workflowChanged`, `decoding`, `storage`.
    let kind: String
    let step: String?
    let message: String

    init(kind: String, step: String?, message: String) {
        self.kind = kind
        self.step = step
        self.message = message
    }

    /// How `error`, which failed the run at `step`, is recorded.
    init(_ error: any Error, step: String) {
        switch error as? DurableError {
        case .workflowChanged(_, let changed)?:
            self.init(kind: "workflowChanged", step: changed, message: String(describing: error))
        case .decoding(_, let failedStep, let underlying)?:
            self.init(kind: "decoding", step: failedStep, message: underlying)
        case .storage(let message)?: self.init(kind: "storage", step: step, message: message)
        case .stepFailed(let failedStep, let message)?:
            self.init(kind: "stepFailed", step: failedStep, message: message)
        default: self.init(kind: "stepFailed", step: step, message: String(describing: error))
        }
    }

    /// The error a later process throws for it (of run `run`).
    func error(run: String) -> DurableError {
        switch kind {
        case "workflowChanged": return .workflowChanged(run: run, step: step ?? "")
        case "decoding": return .decoding(run: run, step: step, underlying: message)
        case "storage": return .storage(message: message)
        default: return .stepFailed(step: step ?? "", message: message)
        }
    }
}

/// The answer to a completion: recorded (false: refused, the claim no longer held the step), and the
/// steps claimed with it (their attempt and failures so far).
struct CompleteResult: @unchecked Sendable {
    // `@unchecked Sendable`: immutable values only (a tuple's labels keep it from being inferred).
    let recorded: Bool
    let claimed: [String: (attempt: Int, failures: Int)]
    /// It was the run's last step to end: the run's end is recorded with it.
    let endedRun: Bool
}

/// The answer to a claim.
enum ClaimResult: Sendable {
    /// This process runs the step now: attempt `attempt` (1 first), after `failures` failures.
    case claimed(attempt: Int, failures: Int, tookOver: Bool)
    /// Recorded completed: its value (nil for a step without one). Nothing runs.
    case recorded(Data?)
    /// Recorded failed for good.
    case failed(message: String)
    /// A retry waits until then (what is left of a backoff).
    case notBefore(Date)
    /// Another live owner holds it; ask again (its lease ends then at the latest).
    case held(until: Date)
    /// The run's cancel was recorded.
    case runCancelled
}
