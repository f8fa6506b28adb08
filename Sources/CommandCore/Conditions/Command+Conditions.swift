import Foundation

// The gate's side effects: conditions added, evaluated once the dependencies finished, categories
// taken, and the hand-over continued (or the command ended cancelled). The pure state is `Gate`.
extension Command {
    /// Adds `condition`, checked after the command's dependencies finished and before it runs; see
    /// ``CommandCondition``. Add conditions before executing (or adding the command to a queue of
    /// yours): a condition added once the check began is ignored, with a diagnostic naming the command (code ``CommandError/Code/changedAfterStart``).
    ///
    /// A condition added once a queue of yours holds the command (it asked for `isReady`) is ignored
    /// too: that queue may already count the command as ready. A condition naming an empty category
    /// is reported at once (a diagnostic) and ends the command cancelled with
    /// ``CommandError/Code/conditionFailed`` when its conditions are checked (its `underlying` error
    /// has code ``CommandError/Code/invalidArgument``).
    public func add(condition: some CommandCondition) {
        let categories = condition.mutuallyExclusiveCategories
        if categories.contains("") {
            diagnose(.invalidArgument, Self.emptyCategoryMessage(displayName, condition.name))
        }
        if !changeGate({ $0.add(condition, categories: categories) }) {
            diagnose(
                .changedAfterStart,
                "add(condition: \(condition.name)) was called after the command was executed, added to a queue or began its checks; it is ignored (add conditions before executing or adding it to a queue)."
            )
        }
    }

    /// Changes the gate (made if there is none) while it may still change: before the command was
    /// executed, handed to a queue of yours, or began its checks. False (nothing changed) after.
    func changeGate(_ change: (inout Gate) -> Void) -> Bool {
        machine.withLock { machine -> Bool in
            guard machine.acceptsDependencies, machine.gate?.phase ?? .closed == .closed,
                machine.face.tracking == .off
            else { return false }
            if machine.gate == nil {
                machine.gate = Gate()
                machine.face.gateOpen = false
            }
            change(&machine.gate!)
            return true
        }
    }

    /// The conditions added, in order.
    public var conditions: [any CommandCondition] { machine.withLock { $0.gate?.conditions ?? [] } }

    /// The mutually exclusive categories the command holds while it runs (its conditions'), sorted.
    public var mutuallyExclusiveCategories: [String] { machine.withLock { $0.gate?.categories ?? [] } }

    /// The gate's state, for reports: nil without conditions.
    package var gatePhase: String? {
        machine.withLock { machine in
            guard let gate = machine.gate else { return nil }
            switch gate.phase {
            case .closed: return "closed"
            case .injecting: return "injecting"
            case .evaluating: return "evaluating"
            case .waitingForCategories: return "waitingForCategories"
            case .open: return "open"
            case .failed: return "failed"
            }
        }
    }

    /// The groups whose hold each of this command's categories runs inside (see `scopeCategories`).
    package var categoryScopes: [String: ObjectIdentifier] { machine.withLock { $0.categoryScopes } }

    /// Who holds each category this command waits for: (category, holder's name, held since).
    package var categoryHolders: [(category: String, holder: String, since: UInt64)] {
        let keys = machine.withLock { $0.gate?.keys(in: $0.categoryScopes) ?? [] }
        return keys.compactMap { key in
            Exclusivity.holder(of: key).map { (key.category, $0.name, $0.since) }
        }
    }

    /// Runs the categories of this command's conditions inside the holds of the groups in `scopes`
    /// (category -> the nearest ancestor group holding it): a group's child is exclusive with its
    /// siblings, not with the group. Set by a group before it executes the child; kept on a command
    /// without conditions too (a group that holds nothing passes its ancestors' holds to its children).
    package func scopeCategories(_ scopes: [String: ObjectIdentifier]) {
        guard !scopes.isEmpty else { return }
        machine.withLock { machine in
            if let gate = machine.gate, gate.phase != .closed { return }
            machine.categoryScopes.merge(scopes) { _, new in new }
        }
    }

    /// A queue of yours holds the command and its dependencies finished: open its gate (the engine's
    /// path opens it in `ready()`).
    func openGateForQueue() {
        let (evaluate, injects) = machine.withLock { machine -> (Bool, Bool) in
            guard machine.outcome == nil, machine.face.dependenciesFinished, !machine.face.gateOpen,
                machine.gate != nil
            else { return (false, false) }
            return (machine.gate!.arrive(engine: false) == .evaluate, !machine.gate!.injections.isEmpty)
        }
        guard evaluate else { return }
        // Called while a queue of yours reads `isReady`: the injections' closures (your code) run on a
        // Dispatch thread, not inside the queue's read.
        if injects {
            DispatchQueue.global().async { [self] in runGate() }
        } else {
            runGate()
        }
    }

    /// The engine made the command ready and its gate's checks begin (the state machine moved it out of
    /// `closed`): `lane` says the hand-over continues its dependency's lane once the gate opens.
    func arriveAtGate(lane: Bool) {
        if lane { machine.withLock { $0.gate?.engineLane = true } }
        runGate()
    }

    static func emptyCategoryMessage(_ command: String, _ condition: String) -> String {
        "'\(command)' has the condition '\(condition)' whose mutually exclusive category is empty; "
            + "a category names what the commands share (\"alert\", \"file:/tmp/x\"). The command will not "
            + "run (it ends cancelled when its conditions are checked): give the category a name."
    }

    /// The gate's stages, in order: the injections (their own stage: each applied once, the first
    /// failure ends the command before any condition is evaluated), then the conditions.
    func runGate() {
        let injections = machine.withLock { machine -> [Injection] in
            guard machine.outcome == nil, machine.gate != nil else { return [] }
            return machine.gate!.takeInjections()
        }
        if !injections.isEmpty, let termination = applyInjections(injections) {
            return endAtGate(termination)
        }
        evaluateConditions()
    }

    /// Evaluates the conditions, all at once (the gate is `.evaluating`), then asks for the categories.
    private func evaluateConditions() {
        let (checking, conditions, emptyCategory) = machine.withLock {
            machine -> (Bool, [any CommandCondition], String?) in
            guard machine.outcome == nil, machine.gate?.phase == .evaluating else { return (false, [], nil) }
            return (true, machine.gate!.evaluated, machine.gate!.emptyCategoryCondition)
        }
        guard checking else { return }
        if let bad = emptyCategory {
            let error = CommandError(
                code: .invalidArgument, command: displayName, message: Self.emptyCategoryMessage(displayName, bad))
            return gateEvaluated(.failed(condition: bad, error: error))
        }
        // `MutuallyExclusive` is always true: only its category counts, no task is needed for it.
        if conditions.isEmpty { return gateEvaluated(.passed) }
        // Strong: nothing else may hold the command while its conditions evaluate. The cycle (command ->
        // gate -> evaluation -> command) ends with the evaluation.
        let evaluation = GateEvaluation(count: conditions.count) { [self] verdict in gateEvaluated(verdict) }
        let stored = machine.withLock { machine -> Bool in
            guard machine.gate?.phase == .evaluating else { return false }
            machine.gate!.evaluation = evaluation
            return true
        }
        guard stored else { return }
        for condition in conditions { evaluation.start(condition, for: self) }
    }

    private func gateEvaluated(_ verdict: GateEvaluation.Verdict) {
        // Called once: by the evaluation, or directly when nothing needs evaluating.
        switch verdict {
        case .passed:
            let request = machine.withLock { machine -> ([ExclusivityBook.Key], String?)? in
                guard machine.gate?.conditionsPassed() == true else { return nil }
                return (machine.gate!.keys(in: machine.categoryScopes), machine.name)
            }
            guard let (keys, name) = request else { return }
            if keys.isEmpty { return gateOpened() }
            let label = ExclusivityBook.Label(name: name, type: Self.self)
            let ticket = Exclusivity.request(keys, label: label, waiter: self)
            // Kept to leave the line if the command ends while it waits (granted at once: kept already).
            let stale = machine.withLock { machine -> Bool in
                guard machine.gate != nil, machine.outcome == nil else { return true }
                if machine.gate!.ticket == nil { machine.gate!.ticket = ticket }
                return false
            }
            if stale { Exclusivity.leave(ticket) }
        case .failed(let condition, let error):
            endAtGate(.cancelled(.conditionFailed(displayName, condition: condition, error: error)))
        case .ignored:
            endAtGate(.completed)
        }
    }

    /// Ends the command at its gate, without running (the gate was evaluating).
    private func endAtGate(_ termination: Termination) {
        let ending = machine.withLock { machine -> Ending? in
            guard machine.gate?.failed() == true else { return nil }
            return machine.terminate(termination)
        }
        if let ending { perform(ending) }
    }

    func categoriesGranted(_ ticket: UInt64, lane: Bool) {
        let open = machine.withLock { machine -> Bool in
            guard machine.outcome == nil, machine.gate != nil else { return false }
            return machine.gate!.granted(ticket)
        }
        if open { gateOpened(lane: lane) } else { Exclusivity.leave(ticket) }
    }

    /// The gate opened: a queue of yours may start the command now, and the engine's hand-over
    /// continues if it waited (on a lane if it came from its dependency's lane, or if `lane`: its
    /// categories were released by a command ending on this thread).
    private func gateOpened(lane: Bool = false) {
        let (engine, tracked) = machine.withLock { machine in
            (machine.gate?.takeEngineWaiting() ?? (waiting: false, lane: false), machine.face.tracking == .on)
        }
        if tracked {
            publish(.ready) { $0.gateOpen = true }
            repostReadiness()
        } else {
            machine.withLock { $0.face.gateOpen = true }
        }
        if engine.waiting { handOver(lane: engine.lane || lane) }
    }
}
