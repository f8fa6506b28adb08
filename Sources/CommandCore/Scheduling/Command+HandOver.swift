import Dispatch
import Foundation

// Hand-over: a ready command is handed to its queue (through `Admission`, on a lane, or in place for a
// combinator node); `Start/` runs it there.
extension Command {
    /// Calls `body` with what makes the command's own queue, with its quality of service (read here,
    /// before the command's lock: Foundation's own lock guards it): a lane queue if `lane`, the command
    /// continuing the work of the dependency that just ended on this thread (see `QueuePool`). The
    /// maker is a non-escaping closure: no context is allocated per hand-over (an escaping one was a
    /// `malloc` a command).
    @inline(__always)
    func withQueueMaker<Result>(lane: Bool, _ body: (() -> OperationQueue) -> Result) -> Result {
        let qualityOfService = qualityOfService
        return body { QueuePool.take(qualityOfService, lane: lane) }
    }

    /// Hands the ready command over: the state machine's one placement decision
    /// (``CommandStateMachine/place(makeQueue:admitting:)``), then its action. `lane`: it was made ready
    /// by its dependency's end on this thread (or its gate opened for such a hand-over), so it continues
    /// on a lane queue, without admission (see ``QueuePool``).
    func handOver(lane: Bool) {
        let admitting = !lane && !InlineExecution.isOn
        let placement = withQueueMaker(lane: lane) { makeQueue in
            machine.withLock { $0.place(makeQueue: makeQueue, admitting: admitting) }
        }
        perform(placement, lane: lane)
    }

    /// Carries out a placement (outside the lock).
    func perform(_ placement: CommandStateMachine.Placement, lane: Bool) {
        switch placement {
        case .queue(let queue): addToQueue(queue)
        case .admission: admit()
        case .inPlace: runInPlace()
        case .startedByCaller:
            // Inside its own `start()`: run there, on the queue that called it.
            if isBeingStartedHere { return runInStart() }
            addToQueue(
                withQueueMaker(lane: lane) { makeQueue in machine.withLock { $0.handOver(makeQueue: makeQueue) } })
        }
    }

    /// Runs a ready combinator node on this thread, through the wiring trampoline: its run subscribes
    /// to its inputs, which are combinators too in a chain, so nested runs are queued, not nested (a
    /// 10,000-stage chain is wired at constant stack depth), and all done before the outermost call
    /// (an `execute`) returns.
    func runInPlace() {
        Trampoline.wiring.run { [self] in begin(external: false) }
    }

    /// Marks this command as a combinator node whose run only subscribes to its inputs: it runs in
    /// place once ready (see `CommandStateMachine.QueueSettings.inPlace`). Set before executing.
    package func runsInPlace() {
        machine.withLock { $0.queue.inPlace = true }
    }

    /// Takes an admission slot, or waits in the backlog for one.
    func admit() {
        let slot = qualityOfService.rawValue
        if Admission.admit(self, slot: slot), !handOverAdmitted(slot: slot) { Admission.started(slot: slot) }
    }

    /// Schedules the run on `queue`, which the engine made or was assigned. The engine adds the command
    /// object itself only when no queue can hold it yet (nobody read `isReady`, which every queue reads
    /// when it is given an operation); otherwise a queue of the user's may hold it (Foundation traps on a
    /// second enqueue), so a small block operation calls `begin`, which runs it unless a `start()`
    /// claimed it first.
    @discardableResult
    func addToQueue(_ queue: OperationQueue) -> Bool {
        if InlineExecution.isOn {
            begin(external: false)
            return true
        }
        // Nobody asked this command's `isReady`: no `OperationQueue` holds it (a queue asks when it is
        // given an operation), so the command itself goes to the engine's queue (one operation fewer per
        // run). Otherwise a queue of yours may hold it, and a block runs it.
        // A command that ended meanwhile (cancelled while waiting for an admission slot) has nothing
        // left to run: it finished when it ended.
        let route = machine.withLock { machine -> QueueEntry in
            guard machine.outcome == nil else { return .none }
            guard machine.face.tracking == .off else { return .block }
            machine.queue.holder = ObjectIdentifier(queue)
            return .object
        }
        switch route {
        case .object: queue.addOperation(self)
        case .block: queue.addOperation(StartOperation { [self] in begin(external: false) })
        case .none: return false
        }
        return true
    }
}

/// How the engine hands a ready command to its queue (see `Command.addToQueue(_:)`).
enum QueueEntry {
    /// Add the command object itself: no queue can hold it yet.
    case object
    /// Add a block that starts it: a queue of the user's may hold it.
    case block
    /// It ended meanwhile: nothing to run.
    case none
}
