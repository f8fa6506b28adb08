import CommandCore
import CommandGraph
import Foundation

/// Works the steps of durable runs recorded in its store, from any process that shares the store:
/// made by ``DurableStore/work(concurrency:)``.
///
/// It claims a step once every step it comes after is recorded completed (a step of a workflow this
/// process registered; the others are left for a worker that did): as many ready steps as it has free
/// slots, oldest run first, in one statement that returns each with its run's input and the recorded
/// values of the steps it comes after; a step's completion hands it the next step of the run in the
/// same transaction (one slot: a chain goes on here without a look); a step waiting for its retry's
/// backoff holds no slot (it is claimed again when due, here or elsewhere); a completion refused (the
/// step was taken over) frees the slot at once. It rebuilds the run's graph from its
/// recorded input (`build`, once per run it works), gives the step the recorded values, runs it and
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
        /// Steps claimed for it and not yet in `inFlight` (being planned): their slots are taken.
        var reserved = 0
        var stopping = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// When the last look took over expired leases (once a backstop period at most).
        var lastTakeOver = Date.distantPast
        /// When it last looked at the schedules, and their next slot then (it looks again at that time,
        /// and at least once a second for schedules made elsewhere).
        var lastScheduleLook = Date.distantPast
        var nextSlot: Date?
        /// The plans of the runs it worked last (a chain's steps are planned once), by run id.
        var plans: [String: RunPlan] = [:]
        var claims = Claims()
    }

    /// How it claimed its steps (the tests' and measurements' figures).
    package struct Claims: Sendable, Equatable {
        /// Steps claimed by its looks, and the looks that claimed any.
        package var byLooks = 0
        package var looks = 0
        /// The most steps one look claimed.
        package var largestLook = 0
        /// Steps handed over by the completions of the steps before them.
        package var handedOver = 0
    }

    /// How it claimed its steps so far.
    package var claims: Claims { state.withLock { $0.claims } }

    private let store: DurableStore
    private let concurrency: Int
    // Guards the steps running, the stop flag and its waiters, the take-over's time and the plans.
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
        case .ready, .ended, .event: poller.poke()
        case .cancelled(let run), .deadline(let run):
            let doomed = state.withLock { state in state.inFlight.values.filter { $0.runID == run } }
            for command in doomed { command.cancel() }
        case .published: break
        }
    }

    /// One look: cancels the steps of runs cancelled by any process, then claims what is ready (one
    /// statement, as many steps as it has free slots; expired leases once a backstop period).
    private func look(_ done: @escaping @Sendable () -> Void) {
        let backstop = store.storage.backstop.inSeconds
        let (stopping, free, runs, backstopLook) = state.withLock { state in
            let now = Date()
            let due = now.timeIntervalSince(state.lastTakeOver) >= backstop
            if due { state.lastTakeOver = now }
            let free = concurrency - state.inFlight.count - state.reserved
            // The slots it claims for are taken at once (a poke meanwhile claims for the others only).
            if !state.stopping && free > 0 { state.reserved += free }
            return (state.stopping, free, due ? Set(state.inFlight.values.map(\.runID)) : [], due)
        }
        // Cancels come with the store's notifications; the backstop also asks for those a lost connection
        // may have missed.
        store.storage.cancelRequested(among: Array(runs)) { [self] cancelled in
            guard !cancelled.isEmpty else { return }
            let doomed = state.withLock { state in state.inFlight.values.filter { cancelled.contains($0.runID) } }
            for command in doomed { command.cancel() }
        }
        if stopping { return done() }  // draining: cancels only, nothing claimed
        fireSchedulesIfDue()
        if free <= 0 { return done() }
        store.storage.claimReady(workflows: store.registeredNames, limit: free, takeOver: backstopLook) {
            [self] answer in
            let claimed = (try? answer.get()) ?? []
            // Each claimed step keeps its slot until it is in flight (or given back); the rest are free.
            state.withLock { state in
                state.reserved -= free - claimed.count
                guard !claimed.isEmpty else { return }
                state.claims.looks += 1
                state.claims.byLooks += claimed.count
                state.claims.largestLook = max(state.claims.largestLook, claimed.count)
            }
            for step in claimed { start(step) }
            // All it had room for: more may be ready.
            if claimed.count == free { poller.poke() }
            done()
        }
    }

    /// Fires the schedules' due slots (each once, whichever worker of any process fires it): at the
    /// next slot it knows of, and once a second for schedules made elsewhere; then looks again at the
    /// next slot.
    private func fireSchedulesIfDue() {
        let due = state.withLock { state -> Bool in
            let now = Date()
            guard now >= (state.nextSlot ?? .distantFuture) || now.timeIntervalSince(state.lastScheduleLook) >= 1 else {
                return false
            }
            state.lastScheduleLook = now
            state.nextSlot = nil
            return true
        }
        guard due else { return }
        store.fireSchedules { [weak self] next in
            guard let self, let next else { return }
            state.withLock { $0.nextSlot = next }
            // Poked off the scheduler's shared queue (see `Poller`).
            _ = DispatchScheduler.shared.schedule(after: Duration(clampingSeconds: next.timeIntervalSinceNow)) {
                [weak self] in
                let poller = self?.poller
                DispatchQueue.global().async { poller?.poke() }
            }
        }
    }

    /// Runs a step claimed for it (by its look, or handed over by a completion): off the store's thread
    /// (planning the run is the user's `build`).
    private func start(_ claimed: ClaimedStep) {
        let key = "\(claimed.run)/\(claimed.step)"
        // Its slot was reserved when it was claimed: taken by the step in flight, or freed here.
        var inFlight = false
        defer {
            if !inFlight {
                state.withLock { $0.reserved -= 1 }
                poller.poke()
            }
        }
        guard let workflow = store.registered(claimed.workflow) else {
            return store.storage.release(run: claimed.run, step: claimed.step, attempt: claimed.claim.attempt)
        }
        let stored = StoredRun(
            id: claimed.run, workflow: claimed.workflow, input: claimed.input, state: .running, cancelRequested: false,
            failure: nil, finalStep: "", steps: [])
        let plan: RunPlan
        if let cached = state.withLock({ $0.plans[claimed.run] }) {
            plan = cached
        } else {
            do {
                plan = try workflow.plan(stored)
            } catch {
                return finishFailed(claimed.run, error: error, step: claimed.step)
            }
            state.withLock { state in
                if state.plans.count >= 4 * concurrency + 64 { state.plans = [:] }
                state.plans[claimed.run] = plan
            }
        }
        let steps = plan.steps
        guard claimed.position < steps.count, steps[claimed.position].id == claimed.step else {
            return finishFailed(
                claimed.run, error: DurableError.workflowChanged(run: claimed.run, step: claimed.step),
                step: claimed.step)
        }
        let definition = steps[claimed.position]
        let execution = RunExecution(
            storage: store.storage, runID: claimed.run, workflow: claimed.workflow, plan: plan,
            context: claimed.context, created: claimed.created,
            worker: RunExecution.WorkerHooks(
                hand: { [weak self] in self?.handRoom ?? 0 },
                handed: { [weak self] steps in
                    guard let self else { return }
                    // Their slots taken now (before the completing step's end frees its own); planned and
                    // started off the store's thread, where completions answer.
                    state.withLock { state in
                        state.reserved += steps.count
                        state.claims.handedOver += steps.count
                    }
                    DispatchQueue.global().async { for step in steps { self.start(step) } }
                },
                retryAt: { [weak self] date in
                    guard let self else { return }
                    // Poked off the scheduler's shared queue (see `Poller`).
                    _ = DispatchScheduler.shared.schedule(after: Duration(clampingSeconds: date.timeIntervalSinceNow)) {
                        [weak self] in
                        let poller = self?.poller
                        DispatchQueue.global().async { poller?.poke() }
                    }
                }))
        do {
            for position in definition.after {
                guard let data = claimed.values[position] else {
                    // Not completed after all (a store changed by hand): given back, for later.
                    return store.storage.release(run: claimed.run, step: claimed.step, attempt: claimed.claim.attempt)
                }
                execution.values.set(try steps[position].codec.decode(data), at: position)
            }
        } catch {
            return finishFailed(
                claimed.run,
                error: DurableError.decoding(
                    run: claimed.run, step: steps[definition.after.first ?? 0].id, underlying: String(describing: error)
                ),
                step: claimed.step)
        }
        execution.setClaim(claimed.claim, at: definition.index)
        if claimed.tookOver {
            execution.log(.notice, claimed.step, "taken over (its owner's lease expired or its process is gone)")
            store.storage.observers.emit(
                .stepTakenOver, workflow: execution.workflow, run: claimed.run, step: claimed.step,
                attempt: claimed.claim.attempt,
                owner: store.storage.owner)
        }
        let command = StepCommand(definition, execution: execution)
        inFlight = state.withLock { state -> Bool in
            if state.stopping || state.inFlight[key] != nil { return false }
            state.inFlight[key] = command
            state.reserved -= 1
            return true
        }
        guard inFlight else {
            return store.storage.release(run: claimed.run, step: claimed.step, attempt: claimed.claim.attempt)
        }
        command.observeEnd { [self] ending in
            ended(key, ending, execution: execution, step: definition.id)
        }
        command.executeQuietly()
    }

    /// How many steps a completion may hand it: the completing step's own slot (a chain goes on here),
    /// none once it stops.
    private var handRoom: Int { state.withLock { $0.stopping ? 0 : 1 } }

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
