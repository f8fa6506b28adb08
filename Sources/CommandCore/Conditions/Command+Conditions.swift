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
        // The common condition, a category alone: no set of categories made, nothing to evaluate.
        if let exclusive = condition as? MutuallyExclusive {
            if exclusive.category.isEmpty {
                diagnose(.invalidArgument, Self.emptyCategoryMessage(displayName, exclusive.name))
            }
            if !changeGate({ $0.add(exclusive) }) { diagnoseLateCondition(exclusive.name) }
            return
        }
        let categories = condition.mutuallyExclusiveCategories
        if categories.contains("") {
            diagnose(.invalidArgument, Self.emptyCategoryMessage(displayName, condition.name))
        }
        if !changeGate({ $0.add(condition, categories: categories) }) { diagnoseLateCondition(condition.name) }
    }

    private func diagnoseLateCondition(_ name: String) {
        diagnose(
            .changedAfterStart,
            "add(condition: \(name)) was called after the command was executed, added to a queue or began its checks; it is ignored (add conditions before executing or adding it to a queue)."
        )
    }

    /// Changes the gate (made if there is none) while it may still change: before the command was
    /// executed, handed to a queue of yours, or began its checks. False (nothing changed) after.
    func changeGate(_ change: (inout Gate) -> Void) -> Bool {
        machine.withLock { machine -> Bool in
            guard machine.acceptsDependencies, machine.gatePhase ?? .closed == .closed,
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
            if let phase = machine.gatePhase, phase != .closed { return }
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
    func arriveAtGate(lane: Bool) { runGate(lane: lane) }

    static func emptyCategoryMessage(_ command: String, _ condition: String) -> String {
        "'\(command)' has the condition '\(condition)' whose mutually exclusive category is empty; "
            + "a category names what the commands share (\"alert\", \"file:/tmp/x\"). The command will not "
            + "run (it ends cancelled when its conditions are checked): give the category a name."
    }

    /// The gate's stages, in order: the injections (their own stage: each applied once, the first
    /// failure ends the command before any condition is evaluated), then the conditions, then the
    /// categories. `lane`: the engine's hand-over continues its dependency's lane once the gate opens.
    func runGate(lane: Bool = false) {
        let injections = machine.withLock { machine -> [Injection] in
            guard machine.outcome == nil, machine.gate != nil else { return [] }
            if lane { machine.gate!.engineLane = true }
            return machine.gate!.takeInjections()
        }
        if !injections.isEmpty, let termination = applyInjections(injections) {
            return endAtGate(termination)
        }
        evaluateConditions()
    }

    /// Evaluates the conditions, all at once (the gate is `.evaluating`), then asks for the categories.
    /// A gate with nothing to evaluate (no condition but `MutuallyExclusive`, which is always true)
    /// passes in the same lock round that reads it.
    private func evaluateConditions() {
        let check = machine.withLock { machine -> GateCheck in
            guard machine.outcome == nil, machine.gatePhase == .evaluating else { return .none }
            if let bad = machine.gate!.emptyCategoryCondition { return .emptyCategory(bad) }
            if !machine.gate!.evaluated.isEmpty { return .evaluate(machine.gate!.evaluated) }
            return machine.passGate()
        }
        switch check {
        case .none:
            return
        case .emptyCategory(let bad):
            let error = CommandError(
                code: .invalidArgument, command: displayName, message: Self.emptyCategoryMessage(displayName, bad))
            gateEvaluated(.failed(condition: bad, error: error))
        case .evaluate(let conditions):
            // Strong: nothing else may hold the command while its conditions evaluate. The cycle
            // (command -> gate -> evaluation -> command) ends with the evaluation.
            let evaluation = GateEvaluation(count: conditions.count) { [self] verdict in gateEvaluated(verdict) }
            let stored = machine.withLock { machine -> Bool in
                guard machine.gatePhase == .evaluating else { return false }
                machine.gate!.evaluation = evaluation
                return true
            }
            guard stored else { return }
            for condition in conditions { evaluation.start(condition, for: self) }
        case .request(let keys, let name):
            requestCategories(keys, name: name)
        case .open:
            gateOpened(lane: false)
        }
    }

    private func gateEvaluated(_ verdict: GateEvaluation.Verdict) {
        // Called once: by the evaluation, or directly when nothing needs evaluating.
        switch verdict {
        case .passed:
            let check = machine.withLock { machine -> GateCheck in
                guard machine.gatePhase == .evaluating else { return .none }
                return machine.passGate()
            }
            switch check {
            case .request(let keys, let name): requestCategories(keys, name: name)
            case .open: gateOpened(lane: false)
            case .none, .emptyCategory, .evaluate: return
            }
        case .failed(let condition, let error):
            endAtGate(.cancelled(.conditionFailed(displayName, condition: condition, error: error)))
        case .ignored:
            endAtGate(.completed)
        }
    }

    /// Asks for the categories; granted at once, the gate opens here.
    private func requestCategories(_ keys: [ExclusivityBook.Key], name: String?) {
        let label = ExclusivityBook.Label(name: name, type: Self.self)
        let (ticket, grantedNow) = Exclusivity.request(keys, label: label, waiter: self)
        if grantedNow { return categoriesGranted(ticket, lane: false) }
        // Kept to leave the line if the command ends while it waits (granted meanwhile: kept already).
        let stale = machine.withLock { machine -> Bool in
            guard machine.gate != nil, machine.outcome == nil else { return true }
            if machine.gate!.ticket == nil { machine.gate!.ticket = ticket }
            return false
        }
        if stale { Exclusivity.leave(ticket) }
    }

    /// Ends the command at its gate, without running (the gate was evaluating).
    private func endAtGate(_ termination: Termination) {
        let ending = machine.withLock { machine, word -> Ending? in
            guard machine.gate?.failed() == true else { return nil }
            return machine.terminate(termination, word: word)
        }
        if let ending { perform(ending) }
    }

    func categoriesGranted(_ ticket: UInt64, lane: Bool) {
        let opening = machine.withLock { machine -> GateOpening? in
            guard machine.outcome == nil, machine.withGate({ $0.granted(ticket) }) == true else { return nil }
            return machine.openGate()
        }
        guard let opening else { return Exclusivity.leave(ticket) }
        finishOpening(opening, lane: lane)
    }

    /// The gate opened (nothing to wait for): see ``finishOpening(_:lane:)``.
    private func gateOpened(lane: Bool) {
        finishOpening(machine.withLock { $0.openGate() }, lane: lane)
    }

    /// The gate opened: a queue of yours may start the command now (its readiness is posted), and the
    /// engine's hand-over continues if it waited (on a lane if it came from its dependency's lane, or
    /// if `lane`: its categories were released by a command ending on this thread).
    private func finishOpening(_ opening: GateOpening, lane: Bool) {
        if opening.tracked {
            publish(.ready) { $0.gateOpen = true }
            repostReadiness()
        }
        if opening.engineWaiting { handOver(lane: opening.engineLane || lane) }
    }
}

/// What the gate does after its injections, decided in one lock round (non-generic: a type nested in
/// `Command<Output>` costs a metadata look-up per use).
enum GateCheck {
    case none
    /// A condition names an empty category.
    case emptyCategory(String)
    /// Conditions to evaluate (in tasks).
    case evaluate([any CommandCondition])
    /// Nothing to evaluate (or every condition was true): these categories to ask for.
    case request([ExclusivityBook.Key], name: String?)
    /// Nothing to evaluate and no category: open.
    case open
}

/// What opening a gate leaves to do outside the lock (see `CommandStateMachine.openGate()`).
struct GateOpening: Sendable {
    let engineWaiting: Bool
    let engineLane: Bool
    /// A queue of yours reads the command's readiness: post it.
    let tracked: Bool
}

extension CommandStateMachine {
    /// Every condition was true (the gate is `.evaluating`): the categories to ask for, or open now
    /// if there are none (see ``openGate()``: the caller opens it).
    mutating func passGate() -> GateCheck {
        guard gate!.conditionsPassed() else { return .none }
        let keys = gate!.keys(in: categoryScopes)
        return keys.isEmpty ? .open : .request(keys, name: name)
    }

    /// Opens the gate (its conditions passed and its categories are held): whether the engine's
    /// hand-over waited for it, and whether a queue of yours must be told (else the face's flag is
    /// set here).
    mutating func openGate() -> GateOpening {
        let engine = gate?.takeEngineWaiting() ?? (waiting: false, lane: false)
        let tracked = face.tracking == .on
        if !tracked { face.gateOpen = true }
        return GateOpening(engineWaiting: engine.waiting, engineLane: engine.lane, tracked: tracked)
    }
}
