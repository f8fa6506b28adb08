import CommandCore

/// A reusable, input-taking command factory with an execution policy: ReactiveCocoa's `RACCommand`,
/// ReactiveSwift's `Action`, without their serial-only limitation.
///
/// ```swift
/// let login = CommandAction<Credentials, Session>(policy: .cancelPrevious) { credentials in
///     LoginCommand(credentials)
/// }
/// login.execute(credentials).execute { event in ... }
/// login.executing.execute { busy in spinner.isHidden = !busy }
/// ```
///
/// ``execute(_:)`` decides at once, under the action's lock, what the new execution gets (see
/// ``ExecutionPolicy``), so concurrent calls from many threads are counted exactly. It returns a
/// command for that execution, already started: observe it (`execute`, `observe`, `await value`)
/// for its own events, or observe the action's ``values``, ``errors``, ``executing`` and ``enabled``
/// subjects for all executions. A refused execution's command fails with
/// `CommandError/Code/notEnabled` (and does not call the factory). Cancelling an execution's command
/// cancels its work (or removes it from the queue); an action never cancels anything by itself except
/// under `.cancelPrevious`.
///
/// Callbacks run where their observers asked (see `CallbackContext`); the factory runs on the
/// execution command's queue when its turn comes.
public final class CommandAction<Input: Sendable, Output: Sendable>: Sendable {
    private struct State {
        var machine: ActionStateMachine
        /// Running and waiting executions, to cancel (cancelPrevious) or start (enqueue).
        var executions: [UInt64: Execution] = [:]
    }

    /// One execution's handle: its command, and what starts it once its turn came.
    private final class Execution: Sendable {
        let command: Command<Output>
        /// Guards the start closure and whether the turn came.
        let turn = Locked<(granted: Bool, start: (@Sendable () -> Void)?)>((false, nil))
        init(command: Command<Output>) { self.command = command }
    }

    // Guards the state machine and the execution table.
    private let state: Locked<State>
    private let make: @Sendable (Input) throws -> Command<Output>
    private let condition: (@Sendable () -> Bool)?

    /// Every value of every execution, as it arrives (no replay).
    public let values = CommandSubject<Output>(replay: .none)
    /// Every failure of an execution (not refusals, not cancellations).
    public let errors = CommandSubject<any Error>(replay: .none)
    /// Whether any execution runs; the current value is replayed to a new observer.
    public let executing = CommandSubject<Bool>(replay: .latest)
    /// Whether an execution now would be accepted; the current value is replayed to a new observer.
    public let enabled = CommandSubject<Bool>(replay: .latest)

    /// An action running `make(input)` for each accepted execution.
    /// - Parameters:
    ///   - policy: what to do with an execution while others run (default: `.reject`, RACCommand's).
    ///   - enabledIf: an extra condition checked at each `execute` (a form's validity, say).
    ///   - make: the command for one execution's input; called when that execution's turn comes.
    public init(
        policy: ExecutionPolicy = .reject, enabledIf: (@Sendable () -> Bool)? = nil,
        _ make: @escaping @Sendable (Input) throws -> Command<Output>
    ) {
        state = Locked(State(machine: ActionStateMachine(policy: policy)))
        self.make = make
        condition = enabledIf
        executing.send(false)
        enabled.send(enabledIf?() ?? true)
    }

    /// True while an execution runs.
    public var isExecuting: Bool { state.withLock { $0.machine.isExecuting } }

    /// True when an execution now would be accepted (policy and condition).
    public var isEnabled: Bool {
        let condition = condition?() ?? true
        return state.withLock { $0.machine.accepts(enabledByCondition: condition) }
    }

    /// Starts an execution for `input` under the policy; returns its command, already started.
    @discardableResult
    public func execute(_ input: Input) -> Command<Output> {
        let conditionHolds = condition?() ?? true
        // Set below, before the command starts: its id, or why it was refused.
        let ticket = Locked<(id: UInt64, refusal: CommandError?)?>(nil)
        let command = Command<Output>.combinator("action execution", inputs: []) { [self] link in
            guard let (id, refusal) = ticket.withLock({ $0 }) else { return }
            if let refusal { return link.emit(.failed(refusal)) }
            begin(id, input: input, link: link)
        }
        let execution = Execution(command: command)
        let (id, decision, policy, changes) = state.withLock { state in
            let wasExecuting = state.machine.isExecuting
            let (id, decision) = state.machine.request(enabledByCondition: conditionHolds)
            if decision != .reject { state.executions[id] = execution }
            if decision != .wait { execution.turn.withLock { $0.granted = true } }
            return (id, decision, state.machine.policy, (wasExecuting, state.machine.isExecuting))
        }
        var refusal: CommandError?
        switch decision {
        case .reject:
            refusal = CommandError(
                code: .notEnabled, command: "CommandAction",
                message: "The action refused this execution: "
                    + (conditionHolds ? "busy under its policy \(policy)" : "its enabledIf condition is false")
                    + ". Check isEnabled first, or choose another ExecutionPolicy.")
        case .startCancelling(let previous):
            let commands = state.withLock { state in previous.compactMap { state.executions[$0]?.command } }
            for previous in commands { previous.cancel() }
        case .start, .wait:
            break
        }
        ticket.withLock { $0 = (id, refusal) }
        if refusal == nil {
            // However it ends (even cancelled before it ran), its slot is freed.
            command.observeState(on: .immediate) { [self] state in
                if state.isTerminal { finish(id) }
            }
        }
        publish(changes)
        command.start()
        return command
    }

    /// The execution's command runs: start the work now, or when its turn comes.
    private func begin(_ id: UInt64, input: Input, link: Link<Output>) {
        guard let execution = state.withLock({ $0.executions[id] }) else { return }
        let work: @Sendable () -> Void = { [self] in
            let inner: Command<Output>
            do { inner = try make(input) } catch {
                errors.send(error)
                return link.emit(.failed(error))
            }
            link.subscribe(runTime: inner) { [self] event in
                switch event {
                case .value(let value):
                    values.send(value)
                    link.emit(.value(value))
                case .failed(let error):
                    errors.send(error)
                    link.forwardTerminal(event, from: inner)
                case .completed, .cancelled:
                    link.forwardTerminal(event, from: inner)
                }
            }
        }
        let startNow = execution.turn.withLock { turn -> Bool in
            if turn.granted { return true }
            turn.start = work
            return false
        }
        if startNow { work() }
    }

    /// Execution `id` ended or was cancelled: free its slot and start the next waiting one.
    private func finish(_ id: UInt64) {
        let (next, changes) = state.withLock { state -> (Execution?, (Bool, Bool)) in
            let wasExecuting = state.machine.isExecuting
            state.executions[id] = nil
            let nextID = state.machine.ended(id)
            return (nextID.flatMap { state.executions[$0] }, (wasExecuting, state.machine.isExecuting))
        }
        publish(changes)
        if let next {
            let start = next.turn.withLock { turn -> (@Sendable () -> Void)? in
                turn.granted = true
                defer { turn.start = nil }
                return turn.start
            }
            start?()
        }
    }

    private func publish(_ change: (was: Bool, now: Bool)) {
        if change.was != change.now { executing.send(change.now) }
        enabled.send(isEnabled)
    }
}
