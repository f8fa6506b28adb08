import Foundation

/// What went wrong with a durable run or its store; each description names the run, step or file and
/// says what to do.
public enum DurableError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `start` or `enqueue` of a workflow this store did not register.
    case unknownWorkflow(String)
    /// `register` of a second workflow with a name already registered.
    case duplicateWorkflow(String)
    /// `start(..., ifExists: .fail)` of a run id the store already has.
    case runExists(String)
    /// The recorded run has a step its workflow's `build` no longer makes.
    case workflowChanged(run: String, step: String)
    /// A step failed for good (its error, as recorded, after a resume; in the process where it failed,
    /// the run throws the error itself).
    case stepFailed(step: String, message: String)
    /// A recorded input (`step` nil) or step value no longer decodes.
    case decoding(run: String, step: String?, underlying: String)
    /// The file was written by a newer version of this library.
    case newerSchema(found: Int, supported: Int)
    /// The file is not a durable store (another database, text, a damaged file).
    case notAStore(path: String)
    /// The store could not be read or written (a read-only file, a full disk, a lock held too long).
    case storage(message: String)
    /// `cancel(runID:)` or `run(_:id:)` named a run id the store does not have.
    case unknownRun(String)
    /// `build` made an invalid flow (two steps with one id, a step of another flow, a bad retry).
    case invalidFlow(workflow: String, message: String)
    /// The run's deadline (``DurableRunOptions/deadline``) passed before it ended.
    case deadlineExceeded(run: String)
    /// An attempt of a step ran longer than its `timeout:` (a failed attempt: its retry applies).
    case stepTimedOut(step: String, after: Duration)
    /// ``DurableStore/send(_:event:toRun:)`` to a run that ended.
    case runEnded(String)
    /// ``DurableStore/send(_:event:toRun:)`` of a second value to one event of a run.
    case eventAlreadySent(run: String, event: String)
    /// ``DurableStore/send(_:event:toRun:)`` after the event's wait timed out (it was recorded `nil`).
    case eventClosed(run: String, event: String)
    /// ``DurableStore/send(_:event:toRun:)`` to a run without that event step.
    case unknownEvent(run: String, event: String)
    /// A schedule's cron expression or interval cannot be used.
    case invalidSchedule(String)
    /// ``DurableStore/retry(runID:)`` of a run that did not fail and was not cancelled.
    case notRetryable(run: String, state: DurableRunState)

    public var description: String {
        switch self {
        case .unknownWorkflow(let name):
            return "No workflow named '\(name)' is registered with this store: call store.register(\(name)'s type) "
                + "before starting or resuming its runs."
        case .duplicateWorkflow(let name):
            return "A workflow named '\(name)' is already registered with this store: give each workflow its own "
                + "stable name."
        case .runExists(let run):
            return
                "The store already has a run '\(run)': use another id, or start with ifExists: .keep to get that run."
        case .workflowChanged(let run, let step):
            return "Run '\(run)' has a recorded step '\(step)' that its workflow no longer makes: keep step ids "
                + "when changing a workflow, or give the changed workflow a new name. The run's records are kept."
        case .stepFailed(let step, let message):
            return "Step '\(step)' failed: \(message)"
        case .decoding(let run, let step, let underlying):
            let what = step.map { "the value of step '\($0)'" } ?? "the input"
            return "Run '\(run)': \(what) no longer decodes (\(underlying)). Keep the recorded types decodable, "
                + "or give the changed workflow a new name. The run's records are kept."
        case .newerSchema(let found, let supported):
            return "The store was written by a newer version of this library (schema \(found); this one knows up "
                + "to \(supported)): open it with that version. The file was not changed."
        case .notAStore(let path):
            return "'\(path)' is not a durable store (another kind of file, another database, or a damaged "
                + "one): give the path of a store, or of a file that does not exist yet. The file was not changed."
        case .storage(let message):
            return "The durable store failed: \(message)"
        case .unknownRun(let run):
            return "The store has no run '\(run)': check the id (store.runs() lists the runs recorded; a pruned run "
                + "is gone)."
        case .invalidFlow(let workflow, let message):
            return "Workflow '\(workflow)': \(message). Nothing was recorded."
        case .deadlineExceeded(let run):
            return "Run '\(run)' did not end before its deadline: its steps were stopped and it is recorded failed. "
                + "Give a later deadline, or start it again under a new id."
        case .stepTimedOut(let step, let after):
            return "Step '\(step)' ran longer than its timeout of \(after): the attempt was cancelled (its retry, "
                + "if any, applies). Give it a longer timeout, or make its work faster."
        case .runEnded(let run):
            return "Run '\(run)' has ended: an event sent to it now would never be read. Check the run's state "
                + "before sending (store.runs), or send to a run still going."
        case .eventAlreadySent(let run, let event):
            return "Run '\(run)' was already sent a value for its event '\(event)': an event takes one value. "
                + "The first value is kept."
        case .eventClosed(let run, let event):
            return "Run '\(run)' stopped waiting for its event '\(event)' (its timeout passed and nil was "
                + "recorded): the value was not recorded."
        case .unknownEvent(let run, let event):
            return "Run '\(run)' has no event step '\(event)': check the id given to flow.event in its workflow."
        case .invalidSchedule(let message):
            return "Invalid schedule: \(message)."
        case .notRetryable(let run, let state):
            return "Run '\(run)' is \(state.rawValue): only a failed or cancelled run is retried. Wait for its end, or "
                + "start a new run."
        }
    }
}
