import Dispatch
import Foundation

/// A unit of business logic that runs once, asynchronously, on its own `OperationQueue`, reports
/// values and one terminal event through a ``CommandResult``, and composes with other commands through
/// `addDependency`.
///
/// Subclass it and override ``run(_:)`` (the parameters are the subclass's own properties), or pass a
/// closure:
///
/// ```swift
/// let fetch = Command<Data> { result in
///     let task = session.dataTask(with: url) { data, _, error in
///         if let data { result.succeed(data) } else { result.fail(error!) }
///     }
///     task.resume()
///     return BlockCancelable { task.cancel() }
/// }
/// fetch.execute { event in print(event) }
/// ```
///
/// **Running.** ``execute(on:_:)-(_,(CommandEvent<Output>)->Void)`` executes it: its dependencies
/// that are commands and have not started are executed too; once every dependency finished, the
/// engine schedules the run on ``executeQueue`` and ``run(_:)`` is called there (a combinator node of
/// `CommandGraph`, whose run only subscribes to its inputs, runs in place instead, so its chain is
/// wired before `execute` returns). A command runs at most once;
/// executing it again attaches another observer to the same run, which first gets everything sent so
/// far (see ``replay``), then the live events. A fresh run is a fresh instance.
///
/// **In your own `OperationQueue`.** A command is a well-behaved asynchronous `Operation`: add it,
/// with its dependencies (commands or plain operations, on any queues, in any order), to queues of
/// yours. ``isReady`` follows Foundation's rule (every dependency finished, or cancelled), so a queue
/// starts it only when it is ready; the queue's `start()` runs it right there, on that queue (its
/// `underlyingQueue` honoured, `OperationQueue.current` is it inside `run`); `isExecuting`,
/// `isFinished`, `isCancelled` and `isReady` are posted as `willChangeValue`/`didChangeValue` pairs.
/// Watch such a command with ``observe(on:_:)`` (it does not run it). **The one rule:** a command in
/// your queue belongs to that queue, which must be the one to start it: do not `execute` it, or a
/// command that depends on it, before the queue started it (the engine cannot see into your queue;
/// it would run the command itself, and Foundation would then find a finished operation in the queue
/// it had not started). `start()` and `execute` racing on one command from several threads run it
/// once; a `start()` after the engine claimed the run only waits for it to end.
///
/// **Dependencies.** `addDependency(_:)` keeps Foundation's meaning (the command starts only after the
/// dependency finished) and `dependencies` lists the edges, but readiness is tracked by the command
/// itself: Foundation's own mechanism is quadratic on a shared queue and can hang or crash on Linux.
/// When a dependency fails or is cancelled, the command does not run: it ends ``CommandState/cancelled(_:)``
/// with a ``CommandError`` of code ``CommandError/Code/dependencyFailed`` or
/// ``CommandError/Code/dependencyCancelled`` naming the dependency, and its observers get that as
/// `.cancelled(error)`. A dependency cycle found when the command is executed fails every command of
/// the cycle with ``CommandError/Code/dependencyCycle``, naming the cycle. A plain `Operation`
/// dependency is not started by the command (enqueue it yourself); it is watched by a small operation
/// that depends on it, and its `completionBlock` is left alone.
///
/// **Callbacks.** Each observer's events arrive on the ``CallbackContext`` captured when it called
/// `execute` (or the one it named), in the order sent, one at a time, the terminal event last. Values
/// travel to the context with one hop per burst.
///
/// **Cancel.** `cancel()`, the token `execute` returns, or a released ``CancelBag`` holding it: the
/// cancelable `run` returned is cancelled once (outside any lock), ``CommandResult/isCancelled`` turns
/// true, observers get `.cancelled` as their terminal event, later sends are ignored, and no value is
/// claimed for delivery after the cancel: called on an observer's own serial context, no value
/// callback starts there after `cancel()` returned; from another thread, the one value per observer
/// whose delivery had already been claimed may still be delivered. A command cancelled before it ran never calls `run`; it stays alive until
/// its dependencies finished. Dependents of a cancelled command end cancelled (see above). As for any
/// Foundation operation, a command cancelled before anything started it turns ready but not finished:
/// `isFinished` turns true when the queue holding it, `start()` or `execute` starts it (a command the
/// engine already executed, waiting for its dependencies, finishes at once).
///
/// **Threads.** Every member may be called from any thread. No lock is held while user code runs
/// (`run`, callbacks, cancelables). Nothing here blocks a thread. The engine's queues run on the
/// global Dispatch queues (not libdispatch's overcommit pool), so the thread count stays near the core
/// count however many commands are ready: `run` must not block its thread.
///
/// - Note: Set `name`, `replay`, ``executeQueue``, ``underlyingQueue`` and `qualityOfService` before
///   executing. `name` is stored under the command's lock (Foundation's own is unsynchronised).
open class Command<Output: Sendable>: CommandNode, Cancelable, @unchecked Sendable {
    // `@unchecked Sendable`: every mutable field of the command lives in `machine` (``CommandNode``),
    // guarded by its lock, except `orderWord` (see there) and `body`, guarded by `machine`'s lock too
    // (see there).

    /// The closure of `Command { result in ... }` (nil: a subclass's `run`), kept here and not in the
    /// state machine, which is not generic (see `ValueLog`). Guarded by `machine`'s lock: set in
    /// `init`, read under the lock where the run starts (`begin`, only while enqueued), and released
    /// once the command ended (`performLocally`, after the lock that ended it: no start reads it
    /// after the end).
    @exclusivity(unchecked) var body: (@Sendable (CommandResult<Output>) -> (any Cancelable)?)?

    /// Creates a command whose work is the subclass's ``run(_:)``.
    public override init() {
        super.init()
    }

    /// Creates a command whose work is `body` (the original's `excuteBlock`): it gets the result sink
    /// and returns what cancels the work, or nil. It runs on ``executeQueue``, and is released when the
    /// command ends.
    public init(_ body: @escaping @Sendable (CommandResult<Output>) -> (any Cancelable)?) {
        self.body = body
        super.init()
    }

    /// Creates a command whose work is `body`, a closure that returns nothing: it gets the result sink
    /// and reports through it now or later, from any thread; the command ends at the terminal event it
    /// sends (returning from `body` ends nothing). There is no cancelable to call on cancel: long
    /// work checks ``CommandResult/isCancelled``. It runs on ``executeQueue``.
    ///
    /// ```swift
    /// let command = Command<Int> { result in
    ///     DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { result.succeed(1) }
    /// }
    /// command.execute { print($0) }   // value(1), then completed
    /// ```
    ///
    /// A one-statement closure without a `return` picks this form. One that returns a ``Cancelable``
    /// (or `nil`) picks `init(_:)` with the cancelable; one that uses `await` picks `init(async:)`,
    /// which completes when the closure returns. A closure of several statements with no `return` and
    /// no `await` does not compile ("missing return in closure expected to return '(any
    /// Cancelable)?'"): add `return nil`, or name this form's type (`{ (result) -> Void in ... }`).
    /// No closure without `await` picks `init(async:)`, which would complete when it returned and
    /// drop what the work it started sends later. (Disfavoured, so that a one-expression closure
    /// returning a cancelable keeps it.)
    @_disfavoredOverload
    public convenience init(_ body: @escaping @Sendable (CommandResult<Output>) -> Void) {
        self.init { (result: CommandResult<Output>) -> (any Cancelable)? in
            body(result)
            return nil
        }
    }

    /// The work. Called once, on ``executeQueue``, when every dependency finished. Report through
    /// `result` (now or later, from any thread) and return what cancels the work, or nil. The default
    /// calls the closure given to `init(_:)`, or fails with ``CommandError/Code/missingRun``.
    open func run(_ result: CommandResult<Output>) -> (any Cancelable)? {
        if let body = result.body { return body(result) }
        result.fail(CommandError.missingRun(displayName))
        return nil
    }

    // MARK: The graph half (declared by `CommandNode`, implemented in `Dependencies/`)

    override func dependencyDidFinish(
        _ outcome: Termination, dependencyName: @autoclosure () -> String, isHold: Bool, lane: inout Bool
    ) -> Propagation? {
        finishDependency(outcome, dependencyName: dependencyName(), isHold: isHold, lane: &lane)
    }

    override func executeGraph() { executeWalk() }

    override func claim(walk: UInt64) -> WalkClaim { claimForWalk(walk) }

    override func register(walk: UInt64, cycleError: CommandError?) -> [CommandNode] {
        registerAfterWalk(walk, cycleError: cycleError)
    }

    override func faceDependencyDidFinish() { faceDependencyEnded() }

    override func handOverAdmitted(slot: Int) -> Bool { handOverAfterAdmission(slot: slot) }

    // MARK: - State

    /// Where the command is in its life; see ``CommandState``.
    public var state: CommandState { machine.withLock { $0.state } }

    /// When the command was executed, became ready, started and ended, and on which thread it ran.
    public var timing: CommandTiming { machine.withLock { $0.timing } }

    /// The command's `Foundation.Progress`, made on first use. `run` reports through
    /// ``CommandResult/reportProgress(completed:of:)``; it is completed when the command ends,
    /// whatever the outcome. A `Graph` (module CommandGraph) adds it as a weighted child of its own progress.
    ///
    /// - Important: on Linux, Foundation's `Progress` is not thread-safe (it has no lock): change it
    ///   only through `reportProgress`, and read it through ``fractionCompleted``, which lock.
    public var progress: Progress {
        if let progress = machine.withLock({ $0.progress }) { return progress }
        // Not `Progress(totalUnitCount:)`: that joins the calling thread's current progress tree on
        // Apple platforms, and a `Graph` adds it as a child of its own. Made and completed outside
        // the lock (see `ProgressGuard`); an ending in between completes it too.
        let made = Progress.discreteProgress(totalUnitCount: 1)
        let (progress, ended, hook) = machine.withLock {
            machine -> (Progress, Bool, (@Sendable (Progress) -> Void)?) in
            if let existing = machine.progress { return (existing, machine.outcome != nil, nil) }
            machine.progress = made
            // Taken once, by the thread that made the progress.
            let hook = machine.hasRareFields ? machine.rare.progressMade : nil
            if hook != nil { machine.rare.progressMade = nil }
            return (made, machine.outcome != nil, hook)
        }
        hook?(progress)
        if ended { ProgressGuard.complete(progress) }
        return progress
    }

    /// Whether ``progress`` was made (read) already.
    package var hasProgress: Bool { machine.withLock { $0.progress != nil } }

    /// Calls `body` once with ``progress`` when it is made, on the thread that made it (at once if it
    /// exists already). For a parent whose children's progress is adopted only when its own is asked
    /// for (a group).
    package func whenProgressMade(_ body: @escaping @Sendable (Progress) -> Void) {
        let existing = machine.withLock { machine -> Progress? in
            if let progress = machine.progress { return progress }
            machine.rare.progressMade = body
            return nil
        }
        if let existing { body(existing) }
    }

    /// The command's progress for a parent to adopt as a child (a `Graph`, a group), or nil if one
    /// already did: a `Progress` has one parent (Foundation traps on a second), so a command in two
    /// graphs or groups counts in the first one's progress only.
    package func progressForAdoption() -> Progress? {
        let progress = progress
        let first = machine.withLock { machine -> Bool in
            defer { machine.progressAdopted = true }
            return !machine.progressAdopted
        }
        return first ? progress : nil
    }

    /// The command's progress as a fraction, read safely from any thread.
    public var fractionCompleted: Double {
        let progress = progress
        return ProgressGuard.withLock { progress.fractionCompleted }
    }

    /// What a failed or cancelled dependency does to this command; see ``DependencyPolicy``. Set it
    /// before executing.
    ///
    /// Set after the command was handed to its queue (its dependencies already decided), the new value
    /// is ignored and reported as a diagnostic naming the command.
    public var dependencyPolicy: DependencyPolicy {
        get { machine.withLock { $0.dependencyPolicy } }
        set {
            let accepted = machine.withLock { machine -> Bool in
                guard machine.acceptsDependencies else { return false }
                machine.dependencyPolicy = newValue
                return true
            }
            if !accepted {
                diagnose(
                    .changedAfterStart,
                    "dependencyPolicy was set after the command was handed to its queue; it is ignored (set it before executing)."
                )
            }
        }
    }

    /// What a second `execute` gets of the values sent before it: all (the default for a command you
    /// write), the latest (the default for a combinator node of `CommandGraph` and a
    /// ``CommandSubject``), or none. Set it before executing.
    public var replay: ReplayPolicy {
        get { machine.withLock { $0.replay } }
        set { machine.withLock { $0.replay = newValue } }
    }

    /// The command's name, used in errors, diagnostics and as its queue's name; stored under the
    /// command's lock.
    open override var name: String? {
        get { machine.withLock { $0.name } }
        set { machine.withLock { $0.name = newValue } }
    }

    /// True while `run` is executing (as published to KVO observers).
    public final override var isExecuting: Bool { machine.withLock { $0.face.executing } }
    /// True once the command ended and something started it: the queue holding it, `start()`,
    /// `execute`, or the engine running a graph. A command cancelled before any of these stays
    /// unfinished until one of them starts it, as a Foundation operation does.
    public final override var isFinished: Bool { machine.withLock { $0.face.finished } }
    /// True once the command was cancelled (by `cancel()`, a cancelled or failed dependency, or its
    /// last consumer detaching).
    public final override var isCancelled: Bool { machine.withLock { $0.face.cancelled } }
    public final override var isAsynchronous: Bool { true }
    /// Foundation's rule: true when every dependency finished, or when the command was cancelled (a
    /// cancel breaks the wait: the queue starts it and it finishes at once). Changes are posted as
    /// KVO pairs, so a user's `OperationQueue` starts a command only when it is ready.
    public final override var isReady: Bool { readiness() }

    // MARK: - Queue

    /// The queue `run` is called on: the command's own, given to it when it is handed over to run
    /// (an idle queue of the engine's pool, or a new one; back to the pool when the command ends)
    /// unless one is assigned. Reading it earlier makes one that stays the command's (not pooled).
    /// Assigning after the command was handed to its queue has no effect on this run and is reported
    /// as a diagnostic. The original's `excuteQueue` / `setExecQueue:`.
    public var executeQueue: OperationQueue {
        get {
            withQueueMaker(lane: false) { makeQueue in executeQueueNow(makeQueue) }
        }
        set {
            let late = machine.withLock { machine -> Bool in
                if machine.queue.handedOver { return true }
                machine.queue.executeQueue = newValue
                machine.queue.ownsQueue = false
                return false
            }
            if late {
                diagnose(
                    .changedAfterStart,
                    "executeQueue was replaced after the command was handed to its queue; the new queue is ignored for this run."
                )
            }
        }
    }

    /// The `DispatchQueue` under the command's own queue (kept alive by the command: Foundation holds
    /// it `unowned(unsafe)`). `DispatchQueue.main` makes the command run on `OperationQueue.main`
    /// (Apple forbids the main queue as an `OperationQueue`'s underlying queue). Ignored when
    /// ``executeQueue`` was assigned. Set before executing.
    public var underlyingQueue: DispatchQueue? {
        get { machine.withLock { $0.queue.underlying } }
        set { machine.withLock { $0.queue.underlying = newValue } }
    }

    // MARK: - Operation

    /// Makes this command start only after `operation` finished; see the type's discussion. Adding a
    /// dependency to a command already handed to its queue fails the command with
    /// ``CommandError/Code/dependencyAddedAfterStart``; one that closes a cycle, with
    /// ``CommandError/Code/dependencyCycle``; itself, with ``CommandError/Code/selfDependency``.
    public final override func addDependency(_ operation: Operation) { addEdge(operation) }

    /// Removes an edge; only before the command is executed (reported as a diagnostic otherwise).
    public final override func removeDependency(_ operation: Operation) { removeEdge(operation) }

    /// The dependencies given to `addDependency`, in order.
    public final override var dependencies: [Operation] { dependencySnapshot }

    /// Starts the command: what an `OperationQueue` holding it calls once it ``isReady``, or a call of
    /// your own, from any thread.
    ///
    /// If nothing has claimed the run yet and every dependency finished, `run` is called right here,
    /// on the calling thread: inside it `OperationQueue.current` is the queue that called `start()`
    /// (its `underlyingQueue` honoured). If dependencies are unfinished (only a direct call can do
    /// that: a queue waits for ``isReady``), it is executed as by `execute`, and runs on
    /// ``executeQueue`` once they finished. If `execute` or another `start()` already claimed the run,
    /// this call only records that the caller waits for `isFinished`, which is posted when the run ends.
    /// A command that was cancelled before it started finishes here. Never calls `super.start()`.
    public final override func start() {
        startFromOutside()
    }

    /// Cancels the command; see the type's discussion. Idempotent; any thread.
    public final override func cancel() {
        let error = CommandError.cancelled(displayName)
        guard let ending = machine.withLock({ $0.terminate(.cancelled(error), word: $1) }) else { return }
        perform(ending)
    }

    // MARK: - Result sink (events and endings: Lifecycle/Command+Ending.swift)

    /// An `.immediate` observer's drain, from the thread's trampoline (see `drain(_:immediate:)`);
    /// in the class, as an override of `CommandNode`'s (an extension's method cannot override).
    final override func drainImmediately(_ observer: UInt64) { drain(observer, immediate: true) }

    /// The result was released without a terminal event: the run failed. Overridden by
    /// `CommandSubject`, so it stays in the class (an extension's method cannot be overridden).
    override func resultReleased() {
        // Almost every run has ended by now, as its end marked in the lock's word: no lock round.
        if machine.claimWord.hasEnded { return }
        // Else the message (which formats the type's name) is only built when it has not ended, in
        // the same critical section as the check (no user code runs in it).
        let ending = machine.withLock { machine, word -> Ending? in
            guard machine.outcome == nil else { return nil }
            let name = machine.name ?? TypeNames.name(of: type(of: self))
            return machine.finish(.failed(CommandError.resultAbandoned(name)), word: word)
        }
        if let ending { perform(ending) }
    }

    /// The stored outcome of a ready-value command (`Command.just`, `.empty`, `.fail`: ``ReadyValueCommand``
    /// overrides it), its value handed to `value`; nil for every other command. Read by
    /// `replayIfFinished` for an untouched ready value, in place of a run.
    func readyOutcome(_ value: (Output) -> Void) -> Termination? { nil }

    package func diagnose(_ code: CommandError.Code, _ message: String) {
        CommandDiagnostics.report(
            CommandDiagnostic(commandID: ObjectIdentifier(self), command: displayName, code: code, message: message))
    }

    deinit {
        // Nothing can be running (a run holds its command through its result). Release the
        // dependencies with a loop: see `DeferredRelease`.
        // One owner of the references only, handed over to DeferredRelease: any other copy kept
        // here would be released when deinit returns, recursively.
        var (dependencies, inputs) = machine.withLock { ($0.takeDependencies(), $0.takeInputs()) }
        if !dependencies.isEmpty || !inputs.isEmpty { DeferredRelease.release(&dependencies, &inputs) }
        let callbacks = machine.withLock { $0.releaseCallbacks }
        for callback in callbacks { callback() }
    }
}

extension Command {
    /// ``Command/executeQueue``'s getter, under the command's lock.
    fileprivate func executeQueueNow(_ makeQueue: () -> OperationQueue) -> OperationQueue {
        machine.withLock { machine in
            if let queue = machine.queue.executeQueue { return queue }
            // Not pooled afterwards: whoever asked may keep it and add operations later.
            let queue: OperationQueue
            if let underlying = machine.queue.underlying {
                queue = QueuePool.queue(on: underlying)
            } else {
                queue = makeQueue()
            }
            if let name = machine.name { queue.name = name }
            machine.queue.executeQueue = queue
            machine.queue.ownsQueue = true
            return queue
        }
    }
}
