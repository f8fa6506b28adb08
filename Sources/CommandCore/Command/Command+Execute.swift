import Foundation

extension Command {
    /// Executes the command (and the commands it depends on) and delivers its events to `handler`.
    ///
    /// `handler` runs on `context`, or on the context captured from the caller
    /// (``CallbackContext/current``): the main queue when called on it, the current `OperationQueue`
    /// inside an operation, a running run loop, else the global queue. Events arrive in the order sent,
    /// one at a time, the terminal event (`.completed`, `.failed`, `.cancelled`) last. Executing an
    /// already executed command attaches `handler` to the same run: it gets what ``replay`` kept, then
    /// the live events. `handler` is released after the terminal event.
    ///
    /// - Returns: a token whose `cancel()` cancels the command (the same as `Operation.cancel()`);
    ///   store it in a ``CancelBag`` to cancel when the bag's owner goes away.
    @inlinable @discardableResult
    public func execute(
        on context: CallbackContext? = nil, _ handler: @escaping @Sendable (CommandEvent<Output>) -> Void
    ) -> any Cancelable {
        // Inlinable, so that this closure is made where `Output` is known: it builds each value's
        // event there, with no metadata look-up (made inside the library, `CommandEvent<Output>` is
        // looked up in the runtime's hash table for every value).
        executeObserved(context: context, value: { handler(.value($0)) }, terminal: handler)
        return self
    }

    /// `execute`'s body: attaches the observer (values and the terminal event handled apart) and
    /// executes the command.
    @usableFromInline
    func executeObserved(
        context: CallbackContext?, value: @escaping @Sendable (Output) -> Void,
        terminal: @escaping @Sendable (CommandEvent<Output>) -> Void
    ) {
        attach(context: context ?? .current, sink: .values(value, terminal: terminal), as: .executor)
        executeGraph()
    }

    /// The original's block shape, for porting: `handler(command, value, error, isCompleted)`.
    ///
    /// A value gives `(command, value, nil, false)`; completion `(command, nil, nil, true)`; a failure
    /// `(command, nil, error, false)`; a cancel `(command, nil, CommandError, false)` with code
    /// ``CommandError/Code/cancelled`` or a dependency code. Delivery as in ``execute(on:_:)-(_,(CommandEvent<Output>)->Void)``.
    @discardableResult
    public func execute(
        on context: CallbackContext? = nil,
        _ handler: @escaping @Sendable (Command<Output>, Output?, (any Error)?, Bool) -> Void
    ) -> any Cancelable {
        execute(on: context) { [unowned(unsafe) self] event in
            // `unowned(unsafe)`: the observer is stored in this command, which is alive while it delivers.
            switch event {
            case .value(let value): handler(self, value, nil, false)
            case .completed: handler(self, nil, nil, true)
            case .failed(let error): handler(self, nil, error, false)
            case .cancelled(let error): handler(self, nil, error, false)
            }
        }
    }

    /// Executes the command and reports to `callback`, which is held **weakly**: once it is released,
    /// nothing more is delivered (and nothing crashes). The original's `executeWithCallback:`.
    /// Delivery as in ``execute(on:_:)-(_,(CommandEvent<Output>)->Void)``.
    @discardableResult
    public func execute<Callback: CommandCallback>(
        on context: CallbackContext? = nil, callback: Callback
    ) -> any Cancelable where Callback.Output == Output {
        let box = WeakBox(callback)
        return execute(on: context) { [unowned(unsafe) self] event in
            // `unowned(unsafe)`: as above, the observer never outlives the command delivering to it.
            guard let callback = box.value else { return }
            switch event {
            case .value(let value): callback.command(self, didSend: value)
            case .completed: callback.commandDidComplete(self)
            case .failed(let error): callback.command(self, didFailWith: error)
            case .cancelled(let error): callback.command(self, wasCancelledWith: error)
            }
        }
    }

    /// Calls `handler` with each state change from now on: `.executing` when `run` begins, then the
    /// terminal state; a change that already happened is delivered at once. Delivery as for events
    /// (in order, one at a time, on `context` or the captured one). Does not execute the command.
    ///
    /// - Returns: a token that detaches `handler` (it does not cancel the command).
    @discardableResult
    public func observeState(
        on context: CallbackContext? = nil, _ handler: @escaping @Sendable (CommandState) -> Void
    ) -> any Cancelable {
        let id = attach(context: context ?? .current, sink: .states(handler))
        return BlockCancelable { [weak self] in self?.removeObserver(id) }
    }

    /// Attaches `handler` to the command's events **without executing it** (for a command started by
    /// other means: a queue it was added to, a dependent, another caller). Delivery as in
    /// ``execute(on:_:)-(_,(CommandEvent<Output>)->Void)``, replay included.
    ///
    /// - Returns: a token that detaches `handler` (it does not cancel the command).
    @inlinable @discardableResult
    public func observe(
        on context: CallbackContext? = nil, _ handler: @escaping @Sendable (CommandEvent<Output>) -> Void
    ) -> any Cancelable {
        // Inlinable for the reason given in `execute`.
        observeValues(context: context, value: { handler(.value($0)) }, terminal: handler)
    }

    /// `observe`'s body.
    @usableFromInline
    func observeValues(
        context: CallbackContext?, value: @escaping @Sendable (Output) -> Void,
        terminal: @escaping @Sendable (CommandEvent<Output>) -> Void
    ) -> any Cancelable {
        let id = attach(context: context ?? .current, sink: .values(value, terminal: terminal))
        return BlockCancelable { [weak self] in self?.removeObserver(id) }
    }

    private func removeObserver(_ id: UInt64) {
        machine.withLock { $0.removeObserver(id) }
    }

    /// The number of observers still waiting for events (for tests and leak checks).
    public var observerCount: Int { machine.withLock { $0.observerCount } }

    /// For combinators: observes this command `.immediate`ly as a counted consumer and executes it.
    /// Cancelling the returned subscription detaches the observer; the command itself is cancelled
    /// when its last consumer detached, unless someone executed it directly or it already ended.
    package func subscribe(_ handler: @escaping @Sendable (CommandEvent<Output>) -> Void) -> any Cancelable {
        subscribe(sink: .events(handler))
    }

    /// `subscribe` with values handed to `value` as they are (no event built per value: the fast path
    /// of single-input operators) and the terminal event to `terminal`.
    package func subscribe(
        value: @escaping @Sendable (Output) -> Void, terminal: @escaping @Sendable (CommandEvent<Output>) -> Void
    ) -> any Cancelable {
        subscribe(sink: .values(value, terminal: terminal))
    }

    private func subscribe(sink: ObserverSink<Output>) -> any Cancelable {
        let id = attach(context: .immediate, sink: sink, as: .consumer)
        executeGraph()
        return BlockCancelable { [self] in
            if machine.withLock({ $0.releaseConsumer(observer: id) }) { cancel() }
        }
    }

    /// Calls `callback` when this command is released (from its `deinit`, on the releasing thread):
    /// what leak checks wait for, instead of polling weak references.
    package func onRelease(_ callback: @escaping @Sendable () -> Void) {
        machine.withLock { $0.releaseCallbacks.append(callback) }
    }

    /// Every command this one holds: its dependencies and a combinator's inputs (for graph walks in
    /// tests and tools).
    package var heldCommands: [Operation] { machine.withLock { $0.heldOperations } }

    /// A combinator's inputs still held (released when it ends).
    package var inputCommands: [Operation] { machine.withLock { $0.inputOperations } }

    /// The commands a combinator subscribed to while running and still alive (see
    /// ``recordRunTimeInput(_:)``).
    package var runTimeInputs: [Operation] { machine.withLock { $0.runTimeLinks.compactMap(\.operation) } }

    /// Records `operation` as subscribed at run time by this combinator (the next command of
    /// `then { }`, a `flatMap` inner, a `catch` recovery, a `retry` attempt), for pictures and stall
    /// reports. Held weakly.
    package func recordRunTimeInput(_ operation: Operation) {
        machine.withLock { $0.recordRunTimeInput(operation) }
    }

    /// Keeps `inputs` alive until this command ends (released with a loop, so a long chain of
    /// combinators is freed without recursion).
    package func retain(inputs: [Operation]) {
        machine.withLock { $0.retain(inputs: inputs) }
    }

    @discardableResult
    func attach(
        context: CallbackContext, sink: ObserverSink<Output>,
        as attachment: CommandStateMachine<Output>.Attachment = .observer
    ) -> UInt64 {
        var drainer: (@Sendable (UInt64) -> Void)?
        if context.isImmediate && machine.withLock({ $0.drainer == nil }) {
            drainer = { @Sendable [unowned(unsafe) self] observer in drain(observer, immediate: true) }
        }
        let (id, wakeup) = machine.withLock { machine in
            if let drainer, machine.drainer == nil { machine.drainer = drainer }
            return machine.addObserver(context: context, sink: sink, as: attachment)
        }
        if let wakeup { schedule(Wakeups(wakeup)) }
        return id
    }

    /// Schedules one drain per woken observer on its context.
    func schedule(_ wakeups: Wakeups) {
        guard let first = wakeups.first else { return }
        schedule(first)
        for wakeup in wakeups.rest { schedule(wakeup) }
    }

    private func schedule(_ wakeup: Wakeup) {
        if let drain = wakeup.drain {
            // No closure made per value: the command's drain, the observer, and the command kept alive
            // by the trampoline until it ran.
            Trampoline.deliveries.run(drain, wakeup.observer, keeping: self)
        } else {
            let immediate = wakeup.context.isImmediate
            wakeup.context.schedule { [self] in drain(wakeup.observer, immediate: immediate) }
        }
    }

    /// Continues an `.immediate` observer's deliveries after one delivered in place.
    func drainInPlace(_ observer: UInt64) { drain(observer, immediate: true) }

    /// Puts an `.immediate` drain at the back of the thread's trampoline.
    private func requeue(_ observer: UInt64) {
        if let drainer = machine.withLock({ $0.drainer }) {
            Trampoline.deliveries.run(drainer, observer, keeping: self)
        } else {
            Trampoline.deliveries.run { [self] in drain(observer, immediate: true) }
        }
    }

    /// Delivers an observer's pending events one by one until none is left. Only one drain per
    /// observer is scheduled at a time (the record's `scheduled` flag), so deliveries never overlap.
    ///
    /// An `.immediate` drain is fair: when more events wait for this observer and the thread's
    /// delivery trampoline holds other work (the stage downstream, woken by the event just
    /// delivered), the drain goes to the back of the trampoline's queue instead of looping. So in
    /// `subject -> map -> filter`, while other threads keep sending to the subject, each value goes
    /// all the way down before the next is taken: downstream stages make progress and nothing piles
    /// up between stages (before, the downstream work waited for the upstream drain to run dry).
    private func drain(_ observer: UInt64, immediate: Bool) {
        // The value claimed under the lock is moved out through this slot: no `Optional<Output>` or
        // generic enum is built per value (each would cost a metadata look-up here, unspecialised).
        withUnsafeTemporaryAllocation(of: Output.self, capacity: 1) { buffer in
            let slot = buffer.baseAddress!
            while true {
                switch machine.withLock({ $0.nextDelivery(for: observer, into: slot) }) {
                case .idle: return
                case .value(let box, let more):
                    let value = slot.move()
                    unsafeDowncast(box, to: SinkBox<Output>.self).deliver(value)
                    if more && immediate && Trampoline.deliveries.hasQueuedWork {
                        // Still scheduled (the record's flag stays set): continue later, after the queue.
                        requeue(observer)
                        return
                    }
                case .terminal(let outcome, let box):
                    unsafeDowncast(box, to: SinkBox<Output>.self).deliver(outcome)
                case .state(let state, let box):
                    unsafeDowncast(box, to: SinkBox<Output>.self).states?(state)
                }
            }
        }
    }
}

/// An object told of a command's events, held weakly by ``Command/execute(on:callback:)``.
///
/// Its methods run on the context captured by `execute` (see ``CallbackContext``), in order, one at a
/// time, the terminal one last. `command(_:wasCancelledWith:)` defaults to
/// `command(_:didFailWith:)`, so every run ends with exactly one terminal call.
public protocol CommandCallback<Output>: AnyObject, Sendable {
    associatedtype Output: Sendable
    /// A value (the original's `onNext`).
    func command(_ command: Command<Output>, didSend value: Output)
    /// The run completed.
    func commandDidComplete(_ command: Command<Output>)
    /// The run failed.
    func command(_ command: Command<Output>, didFailWith error: any Error)
    /// The command was cancelled (or a dependency failed); defaults to `command(_:didFailWith:)`.
    func command(_ command: Command<Output>, wasCancelledWith error: CommandError)
}

extension CommandCallback {
    public func command(_ command: Command<Output>, wasCancelledWith error: CommandError) {
        self.command(command, didFailWith: error)
    }
}

final class WeakBox<Value: AnyObject & Sendable>: Sendable {
    // Written once in init, only read afterwards (the runtime's weak loads are thread-safe); not
    // `weak let`, which needs Swift 6.2.3.
    nonisolated(unsafe) weak var value: Value?
    init(_ value: Value) { self.value = value }
}

/// A command seen by test tools whatever its output type: its release can be awaited and its held
/// commands walked.
package protocol TrackableCommand: AnyObject {
    func onRelease(_ callback: @escaping @Sendable () -> Void)
    var heldCommands: [Operation] { get }
    /// A combinator's inputs (not its dependencies).
    var inputCommands: [Operation] { get }
    /// The commands a combinator subscribed to while running, still alive.
    var runTimeInputs: [Operation] { get }
    var dependencies: [Operation] { get }
    var displayName: String { get }
    var state: CommandState { get }
    var timing: CommandTiming { get }
}

extension Command: TrackableCommand {}
