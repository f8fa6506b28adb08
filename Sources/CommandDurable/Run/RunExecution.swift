import CommandCore
import Foundation

/// What the steps of one run share while it runs in this process: the store, the run's ids, the values
/// of its completed steps, and its first failure.
final class RunExecution: Sendable {
    let storage: SQLStorage
    let runID: String
    let workflow: String
    let values = StepValues()
    /// Each step's id.
    let ids: [String]
    /// For each step, the ids of the steps that come after it (its completion counts them down).
    let dependents: [[String]]
    // Guards the first failure (the step and the error itself) and the cancel flag.
    private let state = Locked<(failure: (step: String, error: any Error)?, cancelled: Bool)>((nil, false))
    // Guards the steps claimed ahead (with the completion of the step before them), by index.
    private let claimedAhead = Locked<[Int: StepClaim]>([:])

    /// A worker's: takes the steps a completion handed over (claimed for this process), and the date a
    /// step's retry is due (the step's command then ends, its slot free until then). Nil for a run
    /// started here, whose own graph runs every step.
    let worker: WorkerHooks?

    /// What a worker does with its steps' hand-overs and retries.
    struct WorkerHooks: Sendable {
        /// How many steps a completion may claim for it now (its slot, or none once it stops).
        let hand: @Sendable () -> Int
        let handed: @Sendable ([ClaimedStep]) -> Void
        let retryAt: @Sendable (Date) -> Void
    }

    /// A run started here: runs its child run (recorded by one of its steps) here too, unless it runs here
    /// already.
    let launchChild: (@Sendable (String) -> Void)?
    /// What the run carries (``DurableRunOptions/context``).
    let context: [String: String]
    /// When the run was recorded (what an entry step's first attempt waited from: ``DurableChange/queued``).
    let created: Date
    /// For each step, whether it comes after none.
    let entries: [Bool]

    init(
        storage: SQLStorage, runID: String, workflow: String, plan: RunPlan, context: [String: String],
        created: Date, worker: WorkerHooks? = nil, launchChild: (@Sendable (String) -> Void)? = nil
    ) {
        self.storage = storage
        self.context = context
        self.created = created
        entries = plan.steps.map(\.after.isEmpty)
        self.worker = worker
        self.launchChild = launchChild
        self.runID = runID
        self.workflow = workflow
        ids = plan.steps.map(\.id)
        dependents = plan.dependents
    }

    /// How many of the steps it makes ready a completion claims: all of them for a run started here (its
    /// graph runs them next), as many as the worker has room for otherwise.
    var handLimit: Int { worker?.hand() ?? ids.count }

    /// The steps a completion claimed: a run started here runs them without claiming them again; a
    /// worker starts them.
    func handed(_ steps: [ClaimedStep]) {
        guard !steps.isEmpty else { return }
        if let worker { return worker.handed(steps) }
        claimedAhead.withLock { ahead in for step in steps { ahead[step.position] = step.claim } }
    }

    /// Marks step `index` claimed already (a worker's claim, made before its command).
    func setClaim(_ claim: StepClaim, at index: Int) {
        claimedAhead.withLock { $0[index] = claim }
    }

    /// The claim made for step `index` ahead of it, taken once.
    func takeClaimAhead(_ index: Int) -> StepClaim? {
        claimedAhead.withLock { $0.removeValue(forKey: index) }
    }

    // Guards the waits for an event of this run's steps here, by step index.
    private let eventWaits = Locked<[Int: @Sendable () -> Void]>([:])

    /// Calls `wake` (once) when a value is sent to this run, unless step `index` waits again before.
    func onEvent(_ index: Int, _ wake: @escaping @Sendable () -> Void) {
        eventWaits.withLock { $0[index] = wake }
    }

    /// A value was sent to one of this run's events: its waits claim their steps again.
    func eventArrived() {
        let waits = eventWaits.withLock { waits in
            defer { waits = [:] }
            return waits
        }
        for wake in waits.values { wake() }
    }

    /// Keeps the first failure of the run (later ones are consequences or concurrent).
    /// A passed deadline wins over the failures it caused (its steps stopped).
    func noteFailure(step: String, _ error: any Error) {
        state.withLock { state in
            if state.failure == nil { return state.failure = (step, error) }
            if case .deadlineExceeded? = error as? DurableError { state.failure = (step, error) }
        }
    }

    var firstFailure: (step: String, error: any Error)? { state.withLock { $0.failure } }

    func markCancelled() { state.withLock { $0.cancelled = true } }

    // Guards whether a step's failure for good is in the record (recorded by this process's attempt, or
    // found recorded by a claim): the store then applies the rule for the run's end itself.
    private let failureRecorded = Locked(false)
    func markFailureRecorded() { failureRecorded.withLock { $0 = true } }
    var stepFailureRecorded: Bool { failureRecorded.withLock { $0 } }
    var isCancelled: Bool { state.withLock { $0.cancelled } }

    func context(step: String, attempt: Int) -> StepContext {
        StepContext(
            runID: runID, stepID: step, attempt: attempt, idempotencyKey: "\(workflow)/\(runID)/\(step)",
            runContext: context)
    }

    func log(_ level: CommandLogLevel, _ step: String, _ message: @autoclosure () -> String) {
        CommandLogging.log(level, command: "\(workflow)/\(runID)/\(step)", message())
    }
}
