import CommandCore
import CommandGraph
import Dispatch
import Foundation

/// An embedded store of durable runs: an SQLite file (or memory, for tests), its own thread, and the
/// workflows this process registered.
///
/// ```swift
/// let store = try DurableStore(path: supportDirectory.appendingPathComponent("work.sqlite"))
/// try store.register(UploadPhoto.self)
/// try await store.resumeUnfinished()     // at launch: every run not ended goes on
/// let run = try await store.start(UploadPhoto.self, id: "photo-\(photo.id)", input: input)
/// let receipt = try await run.value
/// ```
///
/// **Threads.** Every database call runs on the store's own thread. The calls that wait for it
/// (`start`, `enqueue`, `run(_:id:)`, `resumeUnfinished`, `runs`, `cancel`, `prune`) are `async`: they
/// suspend the caller's task, and no thread waits, so `@MainActor` code and a server's request handlers
/// may call them. Each answers once, with its result or with ``DurableError/storage(message:)`` past the
/// store's patience without a connection; a cancelled task stops waiting at once (a request the store's
/// thread had not begun never runs). Steps are recorded without blocking any thread of the engine's,
/// and the records of steps that end together go into one commit. Calling the async API on the store's
/// own thread is a programming error (a precondition).
///
/// **A run's end**, by one rule whoever runs it: every step ended; failed if a step failed for good,
/// completed otherwise with the final step's value (see ``DurableRun``).
///
/// **Several processes** may open one file: a step is claimed with this process as its owner and a
/// lease (`lease`, renewed every third of it while the step runs); another process takes a step over
/// only when its lease expired or its owner's process is gone (same host: a pid that no longer exists,
/// or a pid reused by a later process). A stalled owner's late completion is refused.
///
/// **Closing.** ``close()`` (or the store's release) stops its thread once the requests waiting are
/// done; runs still running here stop being recorded, and resume later.
public final class DurableStore: Sendable {
    let storage: SQLStorage
    /// The enqueued runs waiting for a worker to record their end.
    let awaited: AwaitedRuns
    // Guards the workflows registered and the runs running in this process, by id.
    private let state = Locked<(workflows: [String: RegisteredWorkflow], active: [String: any ActiveRun])>(
        ([:], [:]))
    // Guards the next poll for cancels recorded by other processes (nil once closed).
    private let cancelPoll: Poller
    // Guards whether the store is open.
    private let open = Locked(true)
    // Guards the store's one subscription to its change feed (cancels routed to the runs running here).
    private let subscription = Locked<(any Cancelable)?>(nil)

    /// Opens the store at `path`, creating it if missing.
    ///
    /// - Parameters:
    ///   - path: the file's path (`":memory:"` for a store in memory).
    ///   - durability: ``DurableDurability/full`` (a recorded step survives a power cut) or
    ///     ``DurableDurability/normal`` (survives a crash of the process; faster).
    ///   - lease: how long a claimed step stays this process's without a renewal (renewed every third
    ///     of it); another process takes a step over after it.
    /// - Throws: ``DurableError/notAStore(path:)`` for a file that is not a store,
    ///   ``DurableError/newerSchema(found:supported:)`` for one a newer version wrote (both left
    ///   untouched), ``DurableError/storage(message:)`` when it cannot be opened: a directory, a
    ///   read-only file or folder (nothing is created beside it), a folder that does not exist.
    public convenience init(path: String, durability: DurableDurability = .full, lease: Duration = .seconds(30))
        throws
    {
        try Self.checkPath(path)
        try self.init(
            sql: SQLStorage(path: path, durability: durability, leaseSeconds: max(0.03, lease.inSeconds)))
    }

    /// Opens the store at `url` (a file URL), creating it if missing; see ``init(path:durability:lease:)``.
    /// A URL that is not a file's (`https://...`) throws ``DurableError/storage(message:)``.
    public convenience init(path url: URL, durability: DurableDurability = .full, lease: Duration = .seconds(30))
        throws
    {
        guard url.isFileURL else {
            throw DurableError.storage(
                message: "'\(url.absoluteString)' is not a file URL: give the URL of a file on this device "
                    + "(URL(fileURLWithPath:), or FileManager's applicationSupportDirectory)")
        }
        try self.init(path: url.path, durability: durability, lease: lease)
    }

    /// A store in memory, for tests: nothing survives the process.
    public static func inMemory(lease: Duration = .seconds(30)) throws -> DurableStore {
        try DurableStore(path: ":memory:", durability: .normal, lease: lease)
    }

    /// A store on `storage` (this module's SQLite file, or another module's database:
    /// `CommandDurablePostgres`).
    package init(sql storage: SQLStorage) {
        self.storage = storage
        awaited = AwaitedRuns(storage: storage)
        // At the backstop's pace (50 ms on SQLite, whose other processes' cancels are not announced; a
        // third of the lease, up to 1 s, on a server's store): the runs running here whose cancel another
        // process recorded. A look with no run running here reads nothing.
        cancelPoll = Poller(backstop: storage.backstop)
        // A cancel recorded by any process the store hears of (this one's at once; on a server's store,
        // every process's through its notifications) reaches the run running here at once; the poll
        // covers what no notification announces.
        let token = storage.feed.subscribe { [weak self] change, heard in self?.route(change, heard: heard) }
        storage.observers.attach(self)
        subscription.withLock { $0 = token }
        cancelPoll.start { [weak self] done in
            guard let self else { return done() }
            pollCancels(done)
        }
    }

    deinit { close() }

    /// Stops the store's thread (after the requests waiting); the store cannot be used afterwards.
    public func close() {
        subscription.withLock { token in
            defer { token = nil }
            return token
        }?.cancel()
        open.withLock { $0 = false }
        cancelPoll.stop()
        if storage.observers.finishStreams() { storage.stopWatching() }
        storage.close()
    }

    /// The store's one subscription to its change feed: a cancel reaches the run running here, a run's end
    /// the enqueued runs awaited, every change the workers.
    private func route(_ change: StoreChange, heard: Bool) {
        switch change {
        case .cancelled(let run): state.withLock { $0.active[run] }?.cancelHere()
        case .deadline(let run): state.withLock { $0.active[run] }?.expireHere()
        case .event(let run): state.withLock { $0.active[run] }?.eventArrived()
        case .ended(let run):
            storage.observeEnd(run, heard: heard)
            // A child run's end (its id is its parent's, a `/` and its step's): the parent's step looks again.
            if let slash = run.lastIndex(of: "/") {
                state.withLock { $0.active[String(run[..<slash])] }?.eventArrived()
            }
        case .ready: break
        case .published(let changes):
            return storage.observers.received(changes)
        }
        awaited.changed(change)
        for worker in workers.withLock({ Array($0.values) }) { worker(change) }
    }

    // Guards when the store last looked for runs past their deadline.
    private let lastDeadlineLook = Locked(Date.distantPast)

    // Guards the workers told of the store's changes, by worker.
    private let workers = Locked<[ObjectIdentifier: @Sendable (StoreChange) -> Void]>([:])

    /// Tells `worker` of the store's changes until ``unroute(_:)``.
    func route(to worker: ObjectIdentifier, _ changed: @escaping @Sendable (StoreChange) -> Void) {
        workers.withLock { $0[worker] = changed }
    }

    func unroute(_ worker: ObjectIdentifier) { _ = workers.withLock { $0.removeValue(forKey: worker) } }

    /// Registers `workflow` (its runs can be started and resumed here). Throws
    /// ``DurableError/duplicateWorkflow(_:)`` if a workflow with its name is registered.
    public func register<W: DurableWorkflow>(_ workflow: W.Type) throws {
        try state.withLock { state in
            guard state.workflows[W.name] == nil else { throw DurableError.duplicateWorkflow(W.name) }
            state.workflows[W.name] = RegisteredWorkflow(workflow)
        }
    }

    /// Starts a run of `workflow` with `input`, recorded under `id`, and returns it (running).
    ///
    /// `build` runs first (a `build` that throws, or makes an invalid flow, records nothing and throws);
    /// then the run is recorded in one transaction, then it runs. An `id` the store already has (from
    /// this process or another, ended or not) gives that run with `.keep`: its value once it ended, or
    /// the run itself going on; `.fail` throws ``DurableError/runExists(_:)``.
    ///
    /// Suspends while the store's thread records the run; no thread waits. A store that cannot reach its
    /// database throws ``DurableError/storage(message:)`` after its patience (10 s); a cancelled task
    /// throws `CancellationError` at once (the run is then recorded only if the store's thread had begun
    /// recording it: `run(_:id:)` tells).
    @discardableResult
    public func start<W: DurableWorkflow>(
        _ workflow: W.Type, id: String, input: W.Input, ifExists: DurableIfExists = .keep,
        options: DurableRunOptions = .none
    ) async throws -> DurableRun<W.Output> {
        try await record(W.self, [(id, input)], ifExists: ifExists, options: options, runHere: true)[0]
    }

    /// Starts many runs of `workflow` at once: recorded in one transaction (nothing recorded if one
    /// fails: an invalid flow, an id given twice, with `.fail` an id the store has), then run. The runs
    /// in the order of `runs`; `ifExists` as for one run.
    @discardableResult
    public func start<W: DurableWorkflow>(
        _ workflow: W.Type, runs: [(id: String, input: W.Input)], ifExists: DurableIfExists = .keep,
        options: DurableRunOptions = .none
    ) async throws -> [DurableRun<W.Output>] {
        try await record(W.self, runs, ifExists: ifExists, options: options, runHere: true)
    }

    /// Records a run of `workflow` for the workers (``work(concurrency:)``, in this process or another
    /// sharing the store) and returns it without running anything here: the run's value arrives once a
    /// worker recorded its end (read from the store when the store tells of it: at once from any process
    /// on a server's store, from this process on SQLite's; otherwise every 50 ms on SQLite, every third
    /// of the lease between 50 ms and 1 s on a server; the store's enqueued runs are read together, in
    /// one batched read). Its end is watched only once someone asks for it (`try await run.value`,
    /// `execute`, an observer that executes it, a dependency): a run only recorded
    /// (`try await store.enqueue(...)` in a web route, the result dropped) costs the store nothing more.
    /// `run.cancel()` records the cancel whether or not its end was asked for.
    /// `ifExists`, the wait and a cancelled task as for ``start(_:id:input:ifExists:options:)``.
    @discardableResult
    public func enqueue<W: DurableWorkflow>(
        _ workflow: W.Type, id: String, input: W.Input, ifExists: DurableIfExists = .keep,
        options: DurableRunOptions = .none
    ) async throws -> DurableRun<W.Output> {
        try await record(W.self, [(id, input)], ifExists: ifExists, options: options, runHere: false)[0]
    }

    /// Records many runs of `workflow` for the workers at once, in one transaction (multi-row inserts:
    /// nothing recorded if one fails, as for ``start(_:runs:ifExists:options:)``), and returns them in the order
    /// of `runs`, each watched only once its end is asked for.
    @discardableResult
    public func enqueue<W: DurableWorkflow>(
        _ workflow: W.Type, runs: [(id: String, input: W.Input)], ifExists: DurableIfExists = .keep,
        options: DurableRunOptions = .none
    ) async throws -> [DurableRun<W.Output>] {
        try await record(W.self, runs, ifExists: ifExists, options: options, runHere: false)
    }

    /// The run `id` of `workflow`, as recorded (by this process or another), without its input: ended, its
    /// recorded outcome; running in this process, that run; otherwise a run that waits for its recorded
    /// end (resumed here later, or worked by workers anywhere). Nil when the store has no such run.
    ///
    /// Throws ``DurableError/unknownWorkflow(_:)`` for a workflow not registered here, and
    /// ``DurableError/runExists(_:)`` when the run `id` is of another workflow.
    public func run<W: DurableWorkflow>(_ workflow: W.Type, id: String) async throws -> DurableRun<W.Output>? {
        guard let registered = registered(W.name) else { throw DurableError.unknownWorkflow(W.name) }
        if let running = state.withLock({ $0.active[id] }) {
            guard let run = running as? DurableRun<W.Output> else { throw DurableError.runExists(id) }
            return run
        }
        guard let stored = try await storage.loadRun(id) else { return nil }
        guard stored.workflow == W.name else { throw DurableError.runExists(id) }
        let final = try registered.plan(stored).finalStep
        let plan: DurableRun<W.Output>.Plan =
            stored.state.isEnded
            ? .ended(stored, codec: final.codec) : .awaiting(finalStep: final.id, codec: final.codec)
        let run = DurableRun<W.Output>(id: id, workflow: W.name, store: self, plan: plan)
        if stored.state.isEnded { run.executeQuietly() }
        return run
    }

    /// `start` and `enqueue`, of one run or many: one path, which records the runs in one transaction,
    /// then runs their steps here or leaves them to the workers.
    private func record<W: DurableWorkflow>(
        _: W.Type, _ entries: [(id: String, input: W.Input)], ifExists: DurableIfExists, options: DurableRunOptions,
        runHere: Bool
    ) async throws -> [DurableRun<W.Output>] {
        guard registered(W.name) != nil else { throw DurableError.unknownWorkflow(W.name) }
        if let reason = options.invalidReason { throw DurableError.invalidFlow(workflow: W.name, message: reason) }
        var named = Set<String>()
        for entry in entries {
            try DurableFlow.checkRunID(entry.id, workflow: W.name)
            guard named.insert(entry.id).inserted else {
                throw DurableError.invalidFlow(
                    workflow: W.name,
                    message: "the run id '\(entry.id)' is given twice in one call: give each run its own id")
            }
        }
        // Runs of this process already running: given back as they are (or refused), not recorded again.
        var given: [String: DurableRun<W.Output>] = [:]
        if runHere {
            for entry in entries {
                guard let running = state.withLock({ $0.active[entry.id] }) else { continue }
                guard ifExists == .keep, let run = running as? DurableRun<W.Output> else {
                    throw DurableError.runExists(entry.id)
                }
                given[entry.id] = run
            }
        }
        let fresh = entries.filter { given[$0.id] == nil }
        let plans = try fresh.map { try Self.plan(W.self, input: $0.input) }
        let records = try zip(fresh, plans).map { entry, plan in
            NewRun(
                id: entry.id, workflow: W.name, input: try JSONEncoder().encode(entry.input), plan: plan,
                options: options)
        }
        let created = try await storage.createRuns(records, failIfExists: ifExists == .fail)
        for (index, entry) in fresh.enumerated() {
            let plan = plans[index]
            if case .exists(let stored) = created[index] {
                if stored.workflow != W.name { throw DurableError.runExists(entry.id) }
                if stored.state.isEnded {
                    let run = DurableRun<W.Output>(
                        id: entry.id, workflow: W.name, store: self, plan: .ended(stored, codec: plan.finalStep.codec))
                    run.executeQuietly()
                    given[entry.id] = run
                    continue
                }
            }
            given[entry.id] =
                runHere
                ? launch(
                    DurableRun<W.Output>.self, id: entry.id, workflow: W.name, plan: plan, context: options.context,
                    created: Date())
                // Watched only once someone asks for its end (`value`, `execute`, a dependency).
                : DurableRun<W.Output>(
                    id: entry.id, workflow: W.name, store: self,
                    plan: .awaiting(finalStep: plan.finalStep.id, codec: plan.finalStep.codec))
        }
        return entries.map { given[$0.id]! }
    }

    /// Resumes every run not ended whose workflow this process registered: `build` runs again with the
    /// recorded input; steps recorded completed do not run again, steps begun but not ended run again
    /// (attempt + 1), the rest run as usual. A run whose input no longer decodes, whose recorded steps
    /// no longer decode, or that has a recorded step `build` no longer makes, fails (recorded with why;
    /// nothing deleted). Runs already running here, of a workflow not registered here, or cancelled, are
    /// left as they are. Suspends while the store reads (no thread waits); a resumed run is had with
    /// ``run(_:id:)``.
    @discardableResult
    public func resumeUnfinished() async throws -> DurableResumeReport {
        var resumed: [String] = []
        var notResumed: [(run: String, reason: String)] = []
        for stored in try await storage.unfinishedRuns() {
            let (workflow, running) = state.withLock { ($0.workflows[stored.workflow], $0.active[stored.id] != nil) }
            if running {
                notResumed.append((stored.id, "it is already running in this process"))
                continue
            }
            guard let workflow else {
                notResumed.append(
                    (stored.id, "its workflow '\(stored.workflow)' is not registered in this process"))
                continue
            }
            do {
                let plan = try await workflow.resumable(stored, storage: storage)
                workflow.launch(stored, plan, self)
                CommandLogging.log(.info, command: "\(stored.workflow)/\(stored.id)", "resumed")
                resumed.append(stored.id)
            } catch {
                let step: String
                switch error as? DurableError {
                case .decoding(_, let failed?, _)?: step = failed
                case .workflowChanged(_, let changed)?: step = changed
                default: step = ""
                }
                let failure = RecordedFailure(error, step: step)
                try await storage.finishRun(run: stored.id, state: .failed, error: failure)
                notResumed.append((stored.id, String(describing: error)))
            }
        }
        return DurableResumeReport(resumed: resumed, notResumed: notResumed)
    }

    /// The runs recorded, with their steps. Suspends while the store reads.
    public func runs(_ filter: DurableRunFilter = .all) async throws -> [DurableRunRecord] {
        try await storage.records(filter)
    }

    /// How many runs are in each state (states without runs left out), of the filter's workflow and with
    /// its tags when given (its other fields are not used).
    public func runCounts(_ filter: DurableRunFilter = .all) async throws -> [DurableRunState: Int] {
        try await storage.counts(workflow: filter.workflow, tags: filter.tags)
    }

    /// Records a cancel of run `runID` (it is never resumed) and cancels its steps running here; another
    /// process running its steps stops them when the store tells it (at once on a server's store), at its
    /// next lease renewal at the latest. A run that had ended stays as it ended. Throws
    /// ``DurableError/unknownRun(_:)`` for an id the store does not have.
    public func cancel(runID: String) async throws {
        _ = try await storage.requestCancel(run: runID)
        cancelHere(runID)
    }

    /// Cancels the steps of run `id` running here (its cancel is recorded).
    func cancelHere(_ id: String) { state.withLock { $0.active[id] }?.cancelHere() }

    /// Deletes the runs that ended before `date` (and their steps); returns how many.
    @discardableResult
    public func prune(endedBefore date: Date) async throws -> Int {
        try await storage.prune(endedBefore: date)
    }

    /// Starts a worker: it claims, from any run recorded in this store, the steps of the workflows this
    /// process registered whose earlier steps are recorded completed, and runs up to `concurrency` of
    /// them at once, until ``DurableWorker/stop()``. See ``DurableWorker``.
    ///
    /// - Throws: ``DurableError/storage(message:)`` once the store was closed.
    public func work(concurrency: Int = 4) throws -> DurableWorker {
        guard open.withLock({ $0 }) else {
            throw DurableError.storage(message: "the store was closed: open it again to work its runs")
        }
        return DurableWorker(store: self, concurrency: max(1, concurrency))
    }

    /// The id this store records as the owner of the steps it claims (``DurableStepRecord/owner``):
    /// `host/pid/` and a tail unique to this store.
    public var owner: String { storage.owner }

    // MARK: Internals

    var registeredNames: [String] { state.withLock { Array($0.workflows.keys) } }

    func registered(_ name: String) -> RegisteredWorkflow? { state.withLock { $0.workflows[name] } }

    /// Builds `workflow`'s flow for `input`: its steps and the final one's place.
    static func plan<W: DurableWorkflow>(_: W.Type, input: W.Input) throws -> RunPlan {
        let flow = DurableFlow(workflow: W.name)
        let final = try W.build(flow, input: input)
        if let mistake = flow.mistake { throw mistake }
        guard final.flow == ObjectIdentifier(flow), final.index < flow.steps.count else {
            throw DurableError.invalidFlow(
                workflow: W.name, message: "build returned a step of another flow: return one of this flow's steps")
        }
        return RunPlan(steps: flow.steps, final: final.index)
    }

    /// Makes, tracks and executes a live run.
    func launch<Output: Sendable>(
        _: DurableRun<Output>.Type, id: String, workflow: String, plan: RunPlan, context: [String: String],
        created: Date
    ) -> DurableRun<Output> {
        let execution = RunExecution(
            storage: storage, runID: id, workflow: workflow, plan: plan, context: context, created: created,
            launchChild: { [weak self] child in self?.launchChild(child) })
        let run = DurableRun<Output>(
            id: id, workflow: workflow, store: self,
            plan: .live(steps: plan.steps, final: plan.final, execution: execution))
        state.withLock { $0.active[id] = run }
        run.executeQuietly()
        return run
    }

    /// Runs the child run `id` here (recorded by a step of a run started here), unless it runs here already
    /// or its workflow is not registered here (it then waits for a worker, or a resume, where it is).
    func launchChild(_ id: String) {
        guard state.withLock({ $0.active[id] == nil }) else { return }
        Task {
            guard let stored = try? await storage.loadRun(id), !stored.state.isEnded,
                let workflow = registered(stored.workflow), state.withLock({ $0.active[id] == nil })
            else { return }
            do {
                workflow.launch(stored, try await workflow.resumable(stored, storage: storage), self)
            } catch {
                try? await storage.finishRun(run: id, state: .failed, error: RecordedFailure(error, step: ""))
            }
        }
    }

    /// A run of this process ended (its end recorded).
    func ended(_ id: String) { state.withLock { _ = $0.active.removeValue(forKey: id) } }

    /// A run's `cancel()`: recorded without blocking.
    func recordCancel(_ id: String) {
        storage.requestCancel(run: id) { _ in }
        ended(id)
    }

    func finalValue(of run: StoredRun, completion: @escaping @Sendable (Result<Data?, any Error>) -> Void) {
        storage.stepValue(run: run.id, step: run.finalStep, completion: completion)
    }

    /// Cancels the runs running here whose cancel another process recorded; ends the runs whose deadline
    /// passed (whoever runs them, or nobody: this store is the first to look).
    private func pollCancels(_ done: @escaping @Sendable () -> Void) {
        let ids = state.withLock { Array($0.active.keys) }
        // Deadlines once a second (one indexed read), not at every look.
        let now = Date()
        let deadlines = lastDeadlineLook.withLock { last in
            guard now.timeIntervalSince(last) >= 1 else { return false }
            last = now
            return true
        }
        let storage = storage
        let expire: @Sendable (@escaping @Sendable ([String]) -> Void) -> Void = { found in
            if deadlines { storage.expireDeadlines(completion: found) } else { found([]) }
        }
        // Whether another process watches this store's changes, at the same pace.
        if deadlines { storage.refreshWatched() }
        expire { [weak self] expired in
            guard let self else { return done() }
            for id in expired { state.withLock { $0.active[id] }?.expireHere() }
            storage.cancelRequested(among: ids) { [weak self] cancelled in
                defer { done() }
                guard let self else { return }
                for id in cancelled { state.withLock { $0.active[id] }?.cancelHere() }
            }
        }
    }
}
