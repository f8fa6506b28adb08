import CommandCore
import CommandGraph
import Foundation

/// A run of a durable workflow: a `Command` that sends the run's value once, then completes.
///
/// Execute it, observe it, depend on it, or `try await run.value`, as any command. It is already running
/// when ``DurableStore/start(_:id:input:ifExists:options:)`` returns it (or recorded ended: then it sends the
/// recorded value, or fails with the recorded failure, or ends cancelled).
///
/// **Ending.** A run ends by one rule, whoever runs its steps (a `start`, a resume, workers of any
/// process): once every step ended. It completed if every step completed, and sends the final step's
/// value (the step `build` returned); a side step (one the final step does not wait for) runs and is
/// recorded, and the run ends with it. It failed if a step failed for good (the steps after that one
/// never run): then it fails with the step's own error in the process where the step failed, with
/// ``DurableError/stepFailed(step:message:)`` when that failure was recorded by another process, and
/// with the other ``DurableError``s as they say. The command completes after the run's end is recorded.
///
/// **Cancel.** `cancel()` records the cancel (the run is never resumed; other processes sharing the store
/// stop its steps at their next lease renewal at the latest) and cancels the steps running here.
///
/// **Progress** counts its steps: each step that ended (run now, or recorded completed before) adds one.
///
/// **Callbacks** arrive as for any command: on the context captured when you executed or observed it.
public final class DurableRun<Output: Sendable>: Command<Output>, @unchecked Sendable {
    // `@unchecked Sendable`: every stored property is immutable; the command guards its own state.
    /// The run's id.
    public let id: String
    /// The workflow's name.
    public let workflow: String
    private let store: DurableStore
    private let plan: Plan
    // Guards the step commands of the run in this process, once it runs.
    private let stepCommands = Locked<[Operation]>([])

    /// The commands of the run's steps in this process (empty before it runs, and for a run that had
    /// ended when it was started), in the order `build` made them: `GraphReport.dot(run.steps)` draws
    /// the run, each step with its state (a step recorded completed before shows as completed without a
    /// run time).
    public var steps: [Operation] { stepCommands.withLock { $0 } }

    enum Plan: Sendable {
        /// Runs the steps (some may be recorded completed already).
        case live(steps: [StepDefinition], final: Int, execution: RunExecution)
        /// Already ended: the recorded outcome, and the final step's codec to read its value.
        case ended(StoredRun, codec: StepCodec)
        /// Run by workers (``DurableStore/enqueue(_:id:input:ifExists:options:)``): waits for its recorded end.
        case awaiting(finalStep: String, codec: StepCodec)
    }

    init(id: String, workflow: String, store: DurableStore, plan: Plan) {
        self.id = id
        self.workflow = workflow
        self.store = store
        self.plan = plan
        super.init()
        name = "\(workflow)/\(id)"
        if case .awaiting = plan {
            // Not executed until someone asks for its end (nothing is watched for a run only recorded);
            // a cancel, before or after that, is recorded (a run that ended cancelled by its record is
            // not cancelled again).
            observeEnd { [store, id, endedByRecord] state in
                guard case .cancelled = state, !endedByRecord.withLock({ $0 }) else { return }
                store.awaited.forget(id)
                store.recordCancel(id)
            }
        }
    }

    // Guards whether the run ended as its record says (a recorded cancel is not recorded again).
    private let endedByRecord = Locked(false)

    public override func run(_ result: CommandResult<Output>) -> (any Cancelable)? {
        switch plan {
        case .ended(let stored, let codec):
            deliverRecorded(stored, codec: codec, result)
            return nil
        case .live(let steps, let final, let execution):
            return runLive(steps: steps, final: final, execution: execution, result)
        case .awaiting(_, let codec):
            // One watch for every run this store awaits: it reads their ends together.
            store.awaited.await(id) { [self] answer in
                if result.isCancelled { return }
                switch answer {
                case .failure(let error): result.fail(StepCommand.storageError(error))
                case .success(let stored): deliverRecorded(stored, codec: codec, result)
                }
            }
            return BlockCancelable { [store, id] in store.awaited.forget(id) }
        }
    }

    private func runLive(
        steps definitions: [StepDefinition], final: Int, execution: RunExecution, _ result: CommandResult<Output>
    ) -> (any Cancelable)? {
        let graph = Graph()
        var commands: [StepCommand] = []
        for definition in definitions {
            let command = StepCommand(definition, execution: execution)
            do {
                try graph.add(command, dependsOn: definition.after.map { commands[$0] })
            } catch {
                result.fail(error)
                return nil
            }
            commands.append(command)
        }
        stepCommands.withLock { $0 = commands }
        // The run's progress: its steps ended (recorded completed before, or now), out of all of them.
        let ended = Locked(0)
        let total = Int64(commands.count)
        for command in commands {
            command.observeEnd { _ in
                let count = ended.withLock { count -> Int64 in
                    count += 1
                    return Int64(count)
                }
                result.reportProgress(completed: count, of: total)
            }
        }
        let runID = id
        // The rule for a run's end (the same in every process): every step ended; failed if one failed
        // for good, completed otherwise with the final step's value. The store records it with the last
        // step's end; `finishRun` here is a no-op then, and records the failures no step recorded.
        graph.whenFinished { [store] _ in
            if execution.isCancelled || result.isCancelled {
                store.ended(runID)
                result.command.cancel()
            } else if let (step, error) = execution.firstFailure {
                execution.storage.finishRun(run: runID, state: .failed, error: RecordedFailure(error, step: step)) {
                    _ in
                    store.ended(runID)
                    result.fail(error)
                }
            } else if let value = execution.values.value(at: final) as? Output {
                execution.storage.finishRun(run: runID, state: .completed, error: nil) { answer in
                    store.ended(runID)
                    switch answer {
                    case .success: result.succeed(value)
                    case .failure(let error): result.fail(StepCommand.storageError(error))
                    }
                }
            } else {
                let error = DurableError.stepFailed(step: definitions[final].id, message: "it did not run")
                execution.storage.finishRun(
                    run: runID, state: .failed, error: RecordedFailure(error, step: definitions[final].id)
                ) { _ in
                    store.ended(runID)
                    result.fail(error)
                }
            }
        }
        do {
            try graph.run(on: .immediate)
        } catch {
            result.fail(error)
            return nil
        }
        return BlockCancelable { [store] in
            execution.markCancelled()
            graph.cancel()
            store.recordCancel(runID)
        }
    }

    func expireHere() {
        guard case .live(_, _, let execution) = plan else { return }
        execution.noteFailure(step: "", DurableError.deadlineExceeded(run: id))
        for step in steps { step.cancel() }
    }

    func eventArrived() {
        guard case .live(_, _, let execution) = plan else { return }
        execution.eventArrived()
    }

    private func deliverRecorded(_ stored: StoredRun, codec: StepCodec, _ result: CommandResult<Output>) {
        switch stored.state {
        case .completed:
            store.finalValue(of: stored) { answer in
                do {
                    guard let value = try codec.decode(try answer.get()) as? Output else {
                        throw DurableError.decoding(
                            run: stored.id, step: stored.finalStep, underlying: "not a \(Output.self)")
                    }
                    result.succeed(value)
                } catch let error as DurableError {
                    result.fail(error)
                } catch {
                    result.fail(
                        DurableError.decoding(
                            run: stored.id, step: stored.finalStep, underlying: String(describing: error)))
                }
            }
        case .cancelled:
            endedByRecord.withLock { $0 = true }
            result.command.cancel()
        default:
            let failure = stored.failure ?? RecordedFailure(kind: "stepFailed", step: nil, message: "the run failed")
            result.fail(failure.error(run: stored.id))
        }
    }
}
