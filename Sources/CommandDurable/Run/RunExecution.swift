import CommandCore
import Foundation

/// What the steps of one run share while it runs in this process: the store, the run's ids, the values
/// of its completed steps, and its first failure.
final class RunExecution: Sendable {
    let storage: SQLStorage
    let runID: String
    let workflow: String
    let values = StepValues()
    /// For each step, the steps that come after it.
    let dependents: [[Int]]
    /// For each step, the steps it comes after.
    let dependencies: [[Int]]
    /// Each step's id.
    let ids: [String]
    // Guards the first failure (the step and the error itself) and the cancel flag.
    private let state = Locked<(failure: (step: String, error: any Error)?, cancelled: Bool)>((nil, false))
    // Guards the steps claimed ahead (with the completion of the step before them), by index.
    private let claimedAhead = Locked<[Int: StepClaim]>([:])
    // Guards, for each step, how many of the steps it comes after have not ended here yet.
    private let remaining: Locked<[Int]>

    /// A step's completion claims the steps it makes ready (false for a worker, which runs single steps
    /// of runs whose other steps it does not follow).
    let claimsAhead: Bool

    init(
        storage: SQLStorage, runID: String, workflow: String, steps: [StepDefinition],
        claimsAhead: Bool = true
    ) {
        self.storage = storage
        self.claimsAhead = claimsAhead
        self.runID = runID
        self.workflow = workflow
        ids = steps.map(\.id)
        dependencies = steps.map(\.after)
        var dependents = [[Int]](repeating: [], count: steps.count)
        for step in steps { for dependency in Set(step.after) { dependents[dependency].append(step.index) } }
        self.dependents = dependents
        remaining = Locked(steps.map { Set($0.after).count })
    }

    /// Step `index` ends here (its completion is being recorded, or was read from the record): the steps
    /// after it that have nothing else to wait for. O(its dependents).
    func readyAfter(_ index: Int) -> [(step: String, position: Int)] {
        remaining.withLock { remaining in
            var ready: [(step: String, position: Int)] = []
            for dependent in dependents[index] {
                remaining[dependent] -= 1
                if remaining[dependent] == 0 { ready.append((ids[dependent], dependent)) }
            }
            return ready
        }
    }

    func claimedAhead(_ claimed: [String: StepClaim]) {
        guard !claimed.isEmpty else { return }
        claimedAhead.withLock { ahead in
            for (index, id) in ids.enumerated() { if let claim = claimed[id] { ahead[index] = claim } }
        }
    }

    /// The claim made for step `index` ahead of it, taken once.
    func takeClaimAhead(_ index: Int) -> StepClaim? {
        claimedAhead.withLock { $0.removeValue(forKey: index) }
    }

    /// Keeps the first failure of the run (later ones are consequences or concurrent).
    func noteFailure(step: String, _ error: any Error) {
        state.withLock { if $0.failure == nil { $0.failure = (step, error) } }
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
            runID: runID, stepID: step, attempt: attempt, idempotencyKey: "\(workflow)/\(runID)/\(step)")
    }

    func log(_ level: CommandLogLevel, _ step: String, _ message: @autoclosure () -> String) {
        CommandLogging.log(level, command: "\(workflow)/\(runID)/\(step)", message())
    }
}
