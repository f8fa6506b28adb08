import CommandCore
import Foundation

// Values sent to runs' events, cancels by filter, retries, observers.
extension DurableStore {
    /// Tells `observer` (held weakly) of the changes of runs in this process: see ``DurableObserver``.
    public func add(observer: some DurableObserver) { storage.observers.add(observer) }

    /// Stops telling `observer`.
    public func remove(observer: some DurableObserver) { storage.observers.remove(observer) }

    /// Sends `value` to the event step `event` of run `runID` (``DurableFlow/event(_:of:timeout:waitingFor:)``),
    /// from any process or host sharing the store: recorded whether or not the run reached its wait (a
    /// mailbox; the wait reads it exactly once). A run waiting is woken at once (on a server's store, in
    /// every process, through its notifications; on SQLite, in this process at once and in the others
    /// within a second).
    ///
    /// - Throws: ``DurableError/unknownRun(_:)`` for a run the store does not have,
    ///   ``DurableError/runEnded(_:)`` for one that ended, ``DurableError/unknownEvent(run:event:)`` for a
    ///   step the run does not have, ``DurableError/eventAlreadySent(run:event:)`` for a second value,
    ///   ``DurableError/eventClosed(run:event:)`` once the wait timed out; when this process registered
    ///   the run's workflow, ``DurableError/decoding(run:step:underlying:)`` for a value its event step
    ///   cannot read (and ``DurableError/unknownEvent(run:event:)`` for a step that is not an event).
    ///   Nothing is recorded then.
    public func send<Value: Encodable & Sendable>(_ value: Value, event: String, toRun runID: String) async throws {
        let data = try JSONEncoder().encode(value)
        try await checkEvent(data, event: event, run: runID)
        try await storage.send(data, event: event, run: runID)
    }

    /// Where this process registered the run's workflow: the step is an event, and reads `data`.
    private func checkEvent(_ data: Data, event: String, run runID: String) async throws {
        guard let stored = try await storage.loadRun(runID) else { throw DurableError.unknownRun(runID) }
        guard let workflow = registered(stored.workflow), let plan = try? workflow.plan(stored) else { return }
        guard let step = plan.steps.first(where: { $0.id == event }), case .event = step.kind else {
            throw DurableError.unknownEvent(run: runID, event: event)
        }
        do {
            _ = try step.codec.decode(data)
        } catch {
            throw DurableError.decoding(run: runID, step: event, underlying: String(describing: error))
        }
    }

    /// Cancels every run not ended that `filter` lists (``DurableRunFilter/tagged(_:)``, a workflow, a
    /// creation range...), as ``cancel(runID:)`` does each; returns how many were cancelled (a run that
    /// ended meanwhile is not counted).
    @discardableResult
    public func cancel(matching filter: DurableRunFilter) async throws -> Int {
        var unfinished = filter
        unfinished.states = (filter.states ?? Set(DurableRunState.allCases)).filter { !$0.isEnded }
        var cancelled = 0
        for record in try await runs(unfinished) {
            do {
                if try await storage.requestCancel(run: record.id) { cancelled += 1 }
                cancelHere(record.id)
            } catch DurableError.unknownRun {
                continue  // pruned meanwhile
            }
        }
        return cancelled
    }

    /// Runs again, from where it ended, a run that failed or was cancelled: its completed steps are kept
    /// (not run again), its failed steps and the steps after them run again (a step's attempt number goes
    /// on from its last; its failures are counted anew), its cancel, error and deadline are cleared. The
    /// retry is recorded at once for every process; the run is then worked by the workers, or resumed
    /// (``resumeUnfinished()``). Temporal calls it a reset, DBOS a fork.
    ///
    /// - Throws: ``DurableError/unknownRun(_:)``, ``DurableError/notRetryable(run:state:)`` for a run that
    ///   is running or completed.
    public func retry(runID: String) async throws {
        try await storage.retry(run: runID)
    }

    /// ``retry(runID:)``, then runs it here (as ``start(_:id:input:ifExists:options:)`` does) and returns it.
    @discardableResult
    public func retry<W: DurableWorkflow>(_ workflow: W.Type, runID: String) async throws -> DurableRun<W.Output> {
        guard let registered = registered(W.name) else { throw DurableError.unknownWorkflow(W.name) }
        guard let stored = try await storage.loadRun(runID) else { throw DurableError.unknownRun(runID) }
        guard stored.workflow == W.name else { throw DurableError.runExists(runID) }
        try await storage.retry(run: runID)
        guard let again = try await storage.loadRun(runID) else { throw DurableError.unknownRun(runID) }
        let plan = try await registered.resumable(again, storage: storage)
        return launch(
            DurableRun<W.Output>.self, id: runID, workflow: W.name, plan: plan, context: again.context,
            created: again.created)
    }
}
