import Foundation

// Starting a command: `start()` from outside (a queue of yours, by hand), the engine's own start on
// the command's queue (`begin`), and the run itself (`runNow`). Handing a ready command to a queue is
// `Scheduling/`; the state machine's half is `CommandStateMachine+Start.swift`.
extension Command {
    func begin(external: Bool) {
        // The engine's own queue calling `start()` on the command object it was given is the engine's
        // start, not a caller's.
        // The queue calling `start()`: a lane says so itself (no system call); otherwise Foundation's
        // `OperationQueue.current`.
        let current = external ? LaneQueue.running ?? OperationQueue.current.map(ObjectIdentifier.init) : nil
        var body: (@Sendable (CommandResult<Output>) -> (any Cancelable)?)?
        let (action, slot) = machine.withLock { machine in
            let holding = current != nil && current == machine.queue.holder
            let action = machine.start(external: external, startedByHoldingQueue: holding)
            // The body is read under the lock that began the run (see `body`).
            if case .run = action { body = self.body }
            return (action, machine.takeAdmission())
        }
        // The slot goes to the next command waiting for one before this one runs.
        if let slot { Admission.started(slot: slot) }
        switch action {
        case .none:
            return
        case .postFinished:
            publishFinished()
        case .execute:
            executeGraph()
        case .run(let wakeups):
            runNow(body: body, wakeups: wakeups)
        }
    }

    fileprivate func runNow(body: (@Sendable (CommandResult<Output>) -> (any Cancelable)?)?, wakeups: Wakeups) {
        publish(.executing) { $0.executing = true }
        if !wakeups.isEmpty {
            schedule(wakeups)
        }
        // A state observer (or another thread) may have cancelled it already: then `run` is not called.
        let (cancelled, observers) = machine.withLock { ($0.isCancelled, $0.lifecycleObservers) }
        if !cancelled && !observers.isEmpty {
            for observer in observers { observer.willExecute(self) }
        }
        if !cancelled && CommandLogging.enabled(.debug) { CommandLogging.started(displayName) }
        let returned = cancelled ? nil : run(CommandResult(self, body: body))
        if !cancelled && !observers.isEmpty {
            for observer in observers { observer.didExecute(self) }
        }
        var (action, release) = machine.withLock { $0.runReturned(returned) }
        switch action {
        case .keep, .drop: break
        case .cancel: returned?.cancel()
        }
        if !release.isEmpty { DeferredRelease.release(&release) }
    }

    /// `start()`: run now, on the calling thread, if nothing claimed the run yet; see ``start()``.
    func startFromOutside() {
        let scope = StartScope.current
        scope.starting.append(ObjectIdentifier(self))
        defer { scope.starting.removeLast() }
        begin(external: true)
    }

    /// Whether this command is being started by a `start()` call further up this thread's stack (so
    /// a command that turns out ready runs right there, on the queue that called `start()`).
    var isBeingStartedHere: Bool {
        StartScope.current.starting.last == ObjectIdentifier(self)
    }

    /// Runs the command now, inside `start()`: `run` sees the queue that called `start()` as
    /// `OperationQueue.current`, and that queue is the command's ``executeQueue`` for this run unless
    /// one was assigned.
    func runInStart() {
        let current = OperationQueue.current
        machine.withLock { machine in
            machine.queue.handedOver = true
            if machine.queue.executeQueue == nil, let current {
                machine.queue.executeQueue = current
                machine.queue.ownsQueue = false
                machine.queue.borrowed = true
            }
        }
        begin(external: false)
    }
}

/// The commands whose `start()` is running on this thread, innermost last.
final class StartScope {
    var starting: [ObjectIdentifier] = []
    private static let perThread = ThreadLocal { StartScope() }
    static var current: StartScope { perThread.current }
}
