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
        let box = Weak(callback)
        return execute(on: context) { [unowned(unsafe) self] event in
            // `unowned(unsafe)`: as above, the observer never outlives the command delivering to it.
            guard let callback = box.object else { return }
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

    func removeObserver(_ id: UInt64) {
        machine.withLock { $0.removeObserver(id, word: $1) }
    }

    /// The number of observers still waiting for events (for tests and leak checks).
    public var observerCount: Int { machine.withLock { $0.observerCount } }
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
