import CommandCore
import CommandGraph
import Foundation

/// Works the steps of durable runs recorded in its store, from any process that shares the store:
/// made by ``DurableStore/work(concurrency:)``.
///
/// It claims a step once every step it comes after is recorded completed (a step of a workflow this
/// process registered; the others are left for a worker that did), rebuilds the run's graph from its
/// recorded input (`build`), gives the step the recorded values of the steps it comes after, runs it and
/// records it, by the same rules as a run started here (leases renewed while it runs, a completion fenced
/// by its attempt, retries and their recorded backoff). One run's steps may be worked by several workers
/// in several processes. A run ends by one rule, whoever runs its steps: when every step ended (its end
/// is recorded in the transaction of its last step's); it failed if a step failed for good (the steps
/// after that one never run), and completed otherwise, with the final step's value. A side step (one the
/// final step does not wait for) runs and is recorded like any other.
///
/// **Threads.** It looks for ready steps when a step of its own ends and when the store tells it that
/// steps became ready (a server's store tells every process: PostgreSQL's `LISTEN`/`NOTIFY`; an SQLite
/// store tells only its own workers and runs), and otherwise as a backstop: every 50 ms on SQLite, a third of the lease (50 ms
/// to 1 s) on a server. The store's answers arrive on the store's thread or a global queue; each step's
/// command runs on its own queue. **Stop:** ``stop()`` claims nothing more and returns once the steps it runs have
/// ended and been recorded (a cancel recorded meanwhile still reaches them). A run cancelled from any process has its steps here cancelled at the next
/// look.
public final class DurableWorker: Sendable {
    private struct State {
        var inFlight: [String: StepCommand] = [:]
        var stopping = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let store: DurableStore
    private let concurrency: Int
    // Guards the steps running, the stop flag and its waiters.
    private let state = Locked(State())
    private let poller: Poller

    init(store: DurableStore, concurrency: Int) {
        self.store = store
        self.concurrency = concurrency
        poller = Poller(backstop: store.storage.backstop)
        store.route(to: ObjectIdentifier(self)) { [weak self] change in self?.changed(change) }
        poller.start { [weak self] done in
            guard let self else { return done() }
            look(done)
        }
    }

    deinit {
        poller.stop()
        store.unroute(ObjectIdentifier(self))
    }

    /// How many steps it runs now.
    public var running: Int { state.withLock { $0.inFlight.count } }

    /// Claims nothing more; returns once the steps it runs have ended (and been recorded).
    public func stop() async {
        // While it drains it claims nothing, but still hears of cancels (the store's notifications, and its
        // looks): a step of a run cancelled meanwhile ends, so the drain ends.
        defer {
            poller.stop()
            store.unroute(ObjectIdentifier(self))
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                state.stopping = true
                if state.inFlight.isEmpty { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func changed(_ change: StoreChange) {
        switch change {
        case .ready, .ended: poller.poke()
        case .cancelled(let run):
            let doomed = state.withLock { state in state.inFlight.values.filter { $0.runID == run } }
            for command in doomed { command.cancel() }
        }
    }

    /// One look: cancels the steps of runs cancelled by any process, then claims what is ready.
    private func look(_ done: @escaping @Sendable () -> Void) {
        let (stopping, busy, free, runs) = state.withLock { state in
            (
                state.stopping, Set(state.inFlight.keys), concurrency - state.inFlight.count,
                Set(state.inFlight.values.map(\.runID))
            )
        }
        store.storage.cancelRequested(among: Array(runs)) { [self] cancelled in
            guard !cancelled.isEmpty else { return }
            let doomed = state.withLock { state in state.inFlight.values.filter { cancelled.contains($0.runID) } }
            for command in doomed { command.cancel() }
        }
        if stopping { return done() }  // draining: cancels only, nothing claimed
        store.storage.readySteps(workflows: store.registeredNames, excluding: busy, limit: free) { [self] answer in
            for ready in (try? answer.get()) ?? [] { start(ready) }
            done()
        }
    }

    private func start(_ ready: ReadyStep) {
        let key = "\(ready.run)/\(ready.step)"
        guard let workflow = store.registered(ready.workflow) else { return }
        store.storage.runState(ready.run) { [self] answer in
            guard case .success(let stored?) = answer, !stored.state.isEnded, !stored.cancelRequested else { return }
            let plan: RunPlan
            do {
                plan = try workflow.plan(stored)
            } catch {
                return finishFailed(stored.id, error: error, step: ready.step)
            }
            let steps = plan.steps
            guard let definition = steps.first(where: { $0.id == ready.step }) else {
                return finishFailed(
                    stored.id, error: DurableError.workflowChanged(run: stored.id, step: ready.step), step: ready.step)
            }
            let execution = RunExecution(
                storage: store.storage, runID: stored.id, workflow: stored.workflow, steps: steps, claimsAhead: false)
            store.storage.stepValues(run: stored.id, positions: definition.after) { [self] values in
                guard case .success(let values) = values else { return }
                do {
                    for position in definition.after {
                        guard let data = values[position] else { return }  // not completed after all: later
                        execution.values.set(try steps[position].codec.decode(data), at: position)
                    }
                } catch {
                    return finishFailed(
                        stored.id,
                        error: DurableError.decoding(
                            run: stored.id, step: steps[definition.after.first ?? 0].id,
                            underlying: String(describing: error)), step: ready.step)
                }
                let command = StepCommand(definition, execution: execution)
                let accepted = state.withLock { state -> Bool in
                    if state.stopping || state.inFlight[key] != nil { return false }
                    state.inFlight[key] = command
                    return true
                }
                guard accepted else { return }
                command.observeEnd { [self] ending in
                    ended(key, ending, execution: execution, step: definition.id)
                }
                command.executeQuietly()
            }
        }
    }

    private func ended(_ key: String, _ ending: CommandState, execution: RunExecution, step: String) {
        let finish: @Sendable () -> Void = { [self] in
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.inFlight.removeValue(forKey: key)
                guard state.stopping, state.inFlight.isEmpty else { return [] }
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
            poller.poke()
        }
        switch ending {
        case .failed where !execution.stepFailureRecorded:
            // Failed by something other than its own recorded failure (a value that no longer decodes):
            // recorded here. A step's own failure ended the run, if it was the last, with its record.
            let (failedStep, error) =
                execution.firstFailure ?? (step, DurableError.stepFailed(step: step, message: "failed"))
            let recorded = RecordedFailure(error, step: failedStep)
            execution.storage.finishRun(run: execution.runID, state: .failed, error: recorded) { _ in finish() }
        default:
            finish()
        }
    }

    private func finishFailed(_ run: String, error: any Error, step: String) {
        let recorded = RecordedFailure(error, step: step)
        store.storage.finishRun(run: run, state: .failed, error: recorded) { _ in }
    }
}
