import CommandCore
import Foundation

// What the store keeps of the workflows registered with it and of the runs running here, whatever their
// types.

/// A workflow's steps for one input, as `build` made them, and the final step's place among them.
struct RunPlan: Sendable {
    let steps: [StepDefinition]
    let final: Int
    /// For each step, the ids of the steps that come after it (its completion counts them down): made
    /// once a plan, not once a step.
    let dependents: [[String]]

    init(steps: [StepDefinition], final: Int) {
        self.steps = steps
        self.final = final
        var dependents = [[String]](repeating: [], count: steps.count)
        for step in steps {
            for before in Set(step.after) where before < steps.count { dependents[before].append(step.id) }
        }
        self.dependents = dependents
    }

    var finalStep: StepDefinition { steps[final] }
}

/// A run running in this process, whatever its output type.
protocol ActiveRun: AnyObject, Sendable {
    /// Cancels it here (its cancel is recorded already, or is recorded by it).
    func cancelHere()
    /// Its deadline passed (recorded): its steps stop here and it fails with `deadlineExceeded`.
    func expireHere()
    /// A value was sent to one of its events: its waits look again.
    func eventArrived()
}

extension DurableRun: ActiveRun {
    func cancelHere() { cancel() }
}

/// A registered workflow, whatever its types: resumes a recorded run, or plans one for a worker.
struct RegisteredWorkflow: Sendable {
    /// Runs a recorded run here (its plan checked and its recorded values decoded).
    let launch: @Sendable (StoredRun, RunPlan, DurableStore) -> Void
    /// The run's steps and the final one's place, from its recorded input.
    let plan: @Sendable (StoredRun) throws -> RunPlan

    init<W: DurableWorkflow>(_: W.Type) {
        plan = { stored in
            let input: W.Input
            do {
                input = try JSONDecoder().decode(W.Input.self, from: stored.input)
            } catch {
                throw DurableError.decoding(run: stored.id, step: nil, underlying: String(describing: error))
            }
            return try DurableStore.plan(W.self, input: input)
        }
        launch = { stored, plan, store in
            _ = store.launch(
                DurableRun<W.Output>.self, id: stored.id, workflow: W.name, plan: plan, context: stored.context,
                created: stored.created)
        }
    }

    /// The plan of a run to resume: its input decodes, `build` still makes every recorded step, and every
    /// recorded value still decodes (else the error the run fails with, before anything runs).
    func resumable(_ stored: StoredRun, storage: SQLStorage) async throws -> RunPlan {
        let plan = try plan(stored)
        let made = Set(plan.steps.map(\.id))
        if let changed = stored.steps.first(where: { !made.contains($0) }) {
            throw DurableError.workflowChanged(run: stored.id, step: changed)
        }
        let values = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<[Int: Data?], any Error>) in
            storage.stepValues(run: stored.id, positions: Array(plan.steps.indices)) { continuation.resume(with: $0) }
        }
        for (position, data) in values.sorted(by: { $0.key < $1.key }) where position < plan.steps.count {
            do {
                _ = try plan.steps[position].codec.decode(data)
            } catch {
                throw DurableError.decoding(
                    run: stored.id, step: plan.steps[position].id, underlying: String(describing: error))
            }
        }
        return plan
    }
}
