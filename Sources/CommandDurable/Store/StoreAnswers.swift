import Foundation

// What the engine and `SQLStorage` (the one store, on SQLite and PostgreSQL) exchange: the run to
// record, what a look finds, the answers to claims and completions. SQL and the databases' types stay
// behind `SQLStorage`.

extension SQLStorage {
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
    var options = DurableRunOptions.none
    /// A child run's parent run and the step that waits for it.
    var parent: (run: String, step: String)?
    /// Each step's queue and key (nil: none).
    var queues: [(queue: DurableQueue, key: String?)?] = []

    init(
        id: String, workflow: String, input: Data, plan: RunPlan, options: DurableRunOptions = .none,
        parent: (run: String, step: String)? = nil
    ) {
        self.id = id
        self.workflow = workflow
        self.input = input
        steps = plan.steps.map(\.id)
        after = plan.steps.map(\.after)
        finalStep = plan.finalStep.id
        self.options = options
        self.parent = parent
        queues = plan.steps.map { step in step.queue.map { ($0, step.queueKey) } }
    }
}

/// A step claimed for this process (by a worker's claim, or handed over by the completion before it),
/// with what it needs to run.
struct ClaimedStep: Sendable {
    let run: String
    let workflow: String
    let step: String
    let position: Int
    let claim: StepClaim
    /// Taken from another owner whose lease expired (or whose process is gone).
    let tookOver: Bool
    /// The run's recorded input.
    let input: Data
    /// The run's context (``DurableRunOptions/context``).
    let context: [String: String]
    /// When the run was recorded.
    let created: Date
    /// The recorded values of the steps it comes after, by position (nil for a step without one).
    let values: [Int: Data?]

    /// From a row of a claim's `SQLStorage.claimedColumns`.
    init(row: [SQLValue], tookOver: Bool, values: [Int: Data?]) {
        run = row[0].string ?? ""
        step = row[1].string ?? ""
        position = Int(row[2].int ?? 0)
        claim = StepClaim(attempt: Int(row[3].int ?? 1), failures: Int(row[4].int ?? 0))
        workflow = row[5].string ?? ""
        self.tookOver = tookOver
        input = row[7].data ?? Data()
        context = DurableRunOptions.context(recorded: row[8].string)
        created = Date(timeIntervalSince1970: row[9].double ?? 0)
        self.values = values
    }
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
    /// The run's context (``DurableRunOptions/context``).
    var context: [String: String] = [:]
    /// When the run was recorded.
    var created = Date()
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
        case .deadlineExceeded?: self.init(kind: "deadlineExceeded", step: nil, message: String(describing: error))
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
        case "deadlineExceeded": return .deadlineExceeded(run: run)
        default: return .stepFailed(step: step ?? "", message: message)
        }
    }
}

/// The answer to a completion: recorded (false: refused, the claim no longer held the step), and the
/// steps it made ready that were claimed with it for this process.
struct CompleteResult: Sendable {
    let recorded: Bool
    let handed: [ClaimedStep]
    /// It was the run's last step to end: the run's end is recorded with it.
    let endedRun: Bool
}

/// A claim this process holds on a step: its attempt (1 first) and the failures before it.
struct StepClaim: Sendable, Equatable {
    let attempt: Int
    let failures: Int
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
    /// The run passed its deadline (recorded failed).
    case deadlineExceeded
}
