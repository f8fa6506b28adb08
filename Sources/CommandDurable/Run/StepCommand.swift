import CommandCore
import Dispatch
import Foundation

/// The command of one step of a run: it claims the step in the store, runs the user's command (or takes
/// the recorded value without running anything), and completes only once the store committed the
/// step's value, so no step after it starts before that (the engine's own dependency rule).
///
/// The store's answers arrive on the store's own thread, where only the engine's hand-over runs (a
/// recorded value, a completion); the user's command is made on a global Dispatch queue and executed
/// on its own queue. Cancel (the run's) cancels the user's command and any wait.
final class StepCommand: Command<Void>, @unchecked Sendable {
    // `@unchecked Sendable`: `definition` and `execution` are immutable; `attemptState` is guarded by
    // its lock.
    let definition: StepDefinition
    private let execution: RunExecution
    private let attemptState = Locked<AttemptState>(AttemptState())

    /// The attempt running (or the wait), and whether the step was stopped.
    private struct AttemptState {
        var command: Operation?
        /// A wait's timer (a backoff, a sleep, a wait for an event, a held step asked again).
        var timer: (any Cancelable)?
        /// The running attempt's timeout.
        var timeout: (any Cancelable)?
        /// The attempt whose timeout cancelled it.
        var timedOut: Int?
        /// When the running attempt began (an observer's duration).
        var began = Date()
        var stopped = false
    }

    init(_ definition: StepDefinition, execution: RunExecution) {
        self.definition = definition
        self.execution = execution
        super.init()
        name = "\(execution.workflow)/\(execution.runID)/\(definition.id)"
    }

    /// The run this step belongs to.
    var runID: String { execution.runID }

    override func run(_ result: CommandResult<Void>) -> (any Cancelable)? {
        claim(result)
        return BlockCancelable { [self] in stop() }
    }

    private var stopped: Bool { attemptState.withLock { $0.stopped } }

    private func stop() {
        let (command, timers) = attemptState.withLock { state -> (Operation?, [any Cancelable]) in
            state.stopped = true
            defer {
                state.command = nil
                state.timer = nil
                state.timeout = nil
            }
            return (state.command, [state.timer, state.timeout].compactMap { $0 })
        }
        for timer in timers { timer.cancel() }
        command?.cancel()
    }

    private func claim(_ result: CommandResult<Void>) {
        if stopped { return }
        // Claimed with the completion of the step before it: run it here, on its own queue.
        if let ahead = execution.takeClaimAhead(definition.index) {
            return runAttempt(result, attempt: ahead.attempt, failures: ahead.failures)
        }
        execution.storage.claim(run: execution.runID, step: definition.id, position: definition.index) {
            [self] answer in
            switch answer {
            case .failure(let error):
                fail(result, Self.storageError(error))
            case .success(.recorded(let data)):
                do {
                    execution.values.set(try definition.codec.decode(data), at: definition.index)
                    execution.log(.debug, definition.id, "recorded completed: not run again")
                    result.succeed()
                } catch {
                    fail(
                        result,
                        DurableError.decoding(
                            run: execution.runID, step: definition.id, underlying: String(describing: error)))
                }
            case .success(.claimed(let attempt, let failures, let tookOver)):
                if tookOver {
                    execution.log(
                        .notice, definition.id, "taken over (its owner's lease expired or its process is gone)")
                    observe(.stepTakenOver, attempt: attempt)
                }
                // Off the store's thread: making the step's command is the user's code.
                DispatchQueue.global().async { [self] in runAttempt(result, attempt: attempt, failures: failures) }
            case .success(.notBefore(let date)):
                if waitsForWord { return waitForEvent(until: date, result) }
                wait(until: date, result)
            case .success(.held(let until)):
                // Another live owner runs it: ask again (its record, or its death, decides).
                let poll = Date().addingTimeInterval(min(max(execution.storage.leaseSeconds / 3, 0.01), 1))
                wait(until: min(until.addingTimeInterval(0.001), poll), result)
            case .success(.failed(let message)):
                // Recorded failed (by another attempt, or a step before it failed): the record carries the
                // failure, and the rule for the run's end applies with it; nothing more to record.
                execution.markFailureRecorded()
                fail(result, DurableError.stepFailed(step: definition.id, message: message))
            case .success(.deadlineExceeded):
                execution.markFailureRecorded()
                fail(result, DurableError.deadlineExceeded(run: execution.runID))
            case .success(.runCancelled):
                execution.markCancelled()
                cancel()
            }
        }
    }

    /// Claims the step again at `date` (or, with `event`, once a value is sent to the run, whichever comes
    /// first): once.
    private func wait(until date: Date, _ result: CommandResult<Void>, event: Bool = false) {
        let once = Locked(false)
        let again: @Sendable () -> Void = { [self] in
            guard
                once.withLock({ fired in
                    defer { fired = true }; return !fired
                })
            else { return }
            // Claimed again off the scheduler's shared queue (see `Poller`).
            DispatchQueue.global().async { self.claim(result) }
        }
        if event { execution.onEvent(definition.index, again) }
        let delay = Duration(clampingSeconds: date.timeIntervalSinceNow)
        let token = DispatchScheduler.shared.schedule(after: delay, again)
        let stale = attemptState.withLock { state -> Bool in
            if state.stopped { return true }
            state.timer = token
            return false
        }
        if stale { token.cancel() }
    }

    /// The store refused a write of this attempt: the step is no longer this claim's, and its record
    /// decides. A worker moves on (its slot free); a run started here claims the step again to read it.
    private func claimLost(_ result: CommandResult<Void>) {
        if execution.worker != nil { return result.succeed() }
        claim(result)
    }

    /// Tells the store's observers of a change of this step.
    private func observe(_ kind: DurableChange.Kind, attempt: Int, error: String? = nil, ran: Bool = false) {
        let began = attemptState.withLock { $0.began }
        execution.storage.observers.emit(
            kind, workflow: execution.workflow, run: execution.runID, step: definition.id, attempt: attempt,
            owner: execution.storage.owner,
            duration: ran ? Duration(clampingSeconds: Date().timeIntervalSince(began)) : nil, error: error,
            context: kind == .stepStarted ? execution.context : nil,
            queued: kind == .stepStarted && attempt == 1 && execution.entries[definition.index]
                ? Duration(clampingSeconds: max(0, Date().timeIntervalSince(execution.created))) : nil)
    }

    private func runAttempt(_ result: CommandResult<Void>, attempt: Int, failures: Int) {
        attemptState.withLock { $0.began = Date() }
        observe(.stepStarted, attempt: attempt)
        switch definition.kind {
        case .work: break
        case .sleep(.for(let duration)):
            return beginWait(result, attempt: attempt, failures: failures, seconds: duration.inSeconds, until: nil)
        case .sleep(.until(let date)):
            return beginWait(result, attempt: attempt, failures: failures, seconds: nil, until: date)
        case .event(let timeout):
            return beginWait(result, attempt: attempt, failures: failures, seconds: timeout?.inSeconds, until: nil)
        case .child(let child):
            return startChild(child, result, attempt: attempt, failures: failures)
        }
        let step = definition.make(execution.context(step: definition.id, attempt: attempt), execution.values)
        let stale = attemptState.withLock { state -> Bool in
            if state.stopped { return true }
            state.command = step.command
            return false
        }
        if stale { return step.command.cancel() }
        if attempt > 1 { execution.log(.notice, definition.id, "attempt \(attempt)") }
        if let timeout = definition.timeout {
            let token = DispatchScheduler.shared.schedule(after: timeout) { [self] in
                let command = attemptState.withLock { state -> Operation? in
                    guard state.command === step.command else { return nil }
                    state.timedOut = attempt
                    return state.command
                }
                command?.cancel()
            }
            let stale = attemptState.withLock { state -> Bool in
                if state.stopped || state.command !== step.command { return true }
                state.timeout = token
                return false
            }
            if stale { token.cancel() }
        }
        step.start { [self] end in
            let timeout = attemptState.withLock { state -> (any Cancelable)? in
                state.command = nil
                defer { state.timeout = nil }
                return state.timeout
            }
            timeout?.cancel()
            ended(end, result, attempt: attempt, failures: failures)
        }
    }

    /// An event's or a child run's step: its wait ends when the store says so (a value sent, the child's
    /// end), not at a time.
    private var waitsForWord: Bool {
        switch definition.kind {
        case .event, .child: return true
        case .work, .sleep: return false
        }
    }

    /// A child run's attempt: the child is recorded (once), then its end read: its value completes the
    /// step, its failure fails it (for good); a child going on leaves the step pending, holding no slot,
    /// until the child's end wakes it. A parent started here runs its child here too (a worker's parent
    /// leaves it to the workers).
    private func startChild(_ child: ChildStep, _ result: CommandResult<Void>, attempt: Int, failures: Int) {
        if stopped { return }
        let childID = "\(execution.runID)/\(definition.id)"
        let run: NewRun
        do {
            run = try child.record(childID, execution.context(step: definition.id, attempt: attempt), execution.values)
        } catch {
            return recordFailure(error, result, attempt: attempt, failures: failures, final: true)
        }
        execution.storage.startChild(run: execution.runID, step: definition.id, attempt: attempt, child: run) {
            [self] answer in
            switch answer {
            case .failure(let error):
                fail(result, Self.storageError(error))
            case .success(.refused):
                claimLost(result)
            case .success(.waiting(let created)):
                if created {
                    execution.storage.observers.emit(
                        .runCreated, workflow: run.workflow, run: childID, owner: execution.storage.owner,
                        context: run.options.context)
                }
                if execution.worker != nil { return result.succeed() }
                execution.launchChild?(childID)
                waitForEvent(until: nil, result)
            case .success(.failed(let why)):
                DispatchQueue.global().async { [self] in
                    recordFailure(
                        DurableError.stepFailed(step: definition.id, message: why), result, attempt: attempt,
                        failures: failures, final: true)
                }
            case .success(.completed(let data)):
                complete(with: data, result, attempt: attempt, failures: failures)
            }
        }
    }

    /// Completes a step that ran no command with `data`, its value as the store holds it (an event's, a
    /// child run's): decoded, then recorded by the usual completion, off the store's thread.
    private func complete(with data: Data?, _ result: CommandResult<Void>, attempt: Int, failures: Int) {
        let value: any Sendable
        do {
            value = try definition.codec.decode(data)
        } catch {
            return fail(
                result,
                DurableError.decoding(run: execution.runID, step: definition.id, underlying: String(describing: error)))
        }
        DispatchQueue.global().async { [self] in ended(.completed(value), result, attempt: attempt, failures: failures)
        }
    }

    /// A run started here waits for its event: claimed again when the store tells of a value sent to the
    /// run, at `due` (its timeout), and at least every second on SQLite (whose other processes' sends are
    /// not announced), every 10 s on a server's store (whose are).
    private func waitForEvent(until due: Date?, _ result: CommandResult<Void>) {
        let poll: TimeInterval = execution.storage.notifiesEveryProcess ? 10 : 1
        wait(until: min(due ?? .distantFuture, Date(timeIntervalSinceNow: poll)), result, event: true)
    }

    /// A sleep's or an event's attempt: no command runs. The store records when the wait ends (the first
    /// time), then says whether it is over (the step completes with the event's value, or nil) or the
    /// step waits, pending and holding no slot: a worker moves on (it claims the step again when due, or
    /// when a value is sent), a run started here waits on a timer (and, for an event, for the store's
    /// word that a value was sent; on SQLite, whose other processes' sends are not announced, asked
    /// again every second).
    private func beginWait(
        _ result: CommandResult<Void>, attempt: Int, failures: Int, seconds: TimeInterval?, until: Date?
    ) {
        if stopped { return }
        let event = waitsForWord
        execution.storage.wait(
            run: execution.runID, step: definition.id, attempt: attempt, seconds: seconds, until: until, event: event
        ) { [self] answer in
            switch answer {
            case .failure(let error):
                fail(result, Self.storageError(error))
            case .success(.refused):
                claimLost(result)
            case .success(.waiting(let due)):
                if let worker = execution.worker {
                    if let due { worker.retryAt(due) }
                    return result.succeed()
                }
                if event { return waitForEvent(until: due, result) }
                wait(until: due ?? .distantFuture, result)
            case .success(.due(let data)):
                if event { execution.log(.info, definition.id, data == Data("null".utf8) ? "timed out" : "received") }
                complete(with: data, result, attempt: attempt, failures: failures)
            }
        }
    }

    private func ended(_ end: StepEnd, _ result: CommandResult<Void>, attempt: Int, failures: Int) {
        switch end {
        case .completed(let value):
            let encoded: Data?
            do {
                guard let value else {
                    throw DurableError.stepFailed(step: definition.id, message: "its command completed without a value")
                }
                encoded = try definition.codec.encode(value)
            } catch {
                return recordFailure(error, result, attempt: attempt, failures: failures, final: true)
            }
            execution.storage.complete(
                run: execution.runID, step: definition.id, position: definition.index,
                dependents: execution.dependents[definition.index], attempt: attempt, value: encoded,
                hand: execution.handLimit, withValues: execution.worker != nil
            ) { [self] answer in
                switch answer {
                case .success(let completion) where completion.recorded:
                    observe(.stepCompleted, attempt: attempt, ran: true)
                    execution.values.set(value!, at: definition.index)
                    execution.handed(completion.handed)
                    result.succeed()
                case .success:
                    // Refused: this claim no longer holds the step (another process took it over after
                    // the lease expired, or the run was cancelled). Its record decides: a worker moves on,
                    // a run started here reads it.
                    execution.log(.warning, definition.id, "completion refused: the step is no longer this process's")
                    claimLost(result)
                case .failure(let error):
                    fail(result, Self.storageError(error))
                }
            }
        case .failed(let error):
            recordFailure(error, result, attempt: attempt, failures: failures, final: false)
        case .cancelled(let error):
            if attemptState.withLock({ $0.timedOut == attempt }), let timeout = definition.timeout {
                return recordFailure(
                    DurableError.stepTimedOut(step: definition.id, after: timeout), result, attempt: attempt,
                    failures: failures, final: false)
            }
            if stopped || execution.isCancelled { return }
            recordFailure(error, result, attempt: attempt, failures: failures, final: false)
        }
    }

    private func recordFailure(
        _ error: any Error, _ result: CommandResult<Void>, attempt: Int, failures: Int, final: Bool
    ) {
        let failures = failures + 1
        let retries = !final && failures < definition.retry.allowedFailures
        // The backoff: recorded by the database's clock, waited here by this host's.
        let retryAfter = retries ? definition.retry.delay(afterFailure: failures).inSeconds : nil
        let message = String(describing: error)
        execution.storage.fail(
            run: execution.runID, step: definition.id, attempt: attempt, error: message,
            errorType: String(reflecting: type(of: error)), retryAfter: retryAfter
        ) { [self] answer in
            switch answer {
            case .success(true):
                observe(retryAfter == nil ? .stepFailed : .stepRetrying, attempt: attempt, error: message, ran: true)
                if let retryAfter {
                    let retryAt = Date(timeIntervalSinceNow: retryAfter)
                    execution.log(.notice, definition.id, "failed (\(message)); retrying at attempt \(attempt + 1)")
                    // A worker's step holds no slot through its backoff: the worker claims it again when due.
                    if let worker = execution.worker {
                        worker.retryAt(retryAt)
                        return result.succeed()
                    }
                    wait(until: retryAt, result)
                } else {
                    execution.markFailureRecorded()
                    fail(result, error)
                }
            case .success(false):
                claimLost(result)
            case .failure(let storageError):
                fail(result, Self.storageError(storageError))
            }
        }
    }

    private func fail(_ result: CommandResult<Void>, _ error: any Error) {
        execution.noteFailure(step: definition.id, error)
        result.fail(error)
    }

    static func storageError(_ error: any Error) -> any Error {
        if error is DurableError { return error }
        return DurableError.storage(message: String(describing: error))
    }
}
