/// A command whose events its owner sends from outside (the original's `subject:`; ReactiveCocoa's
/// `RACSubject` / `RACReplaySubject`): a text field's changes, a socket's messages, fed into a graph.
///
/// ```swift
/// let username = CommandSubject<String>(replay: .latest)
/// let password = CommandSubject<String>(replay: .latest)
/// let valid = combineLatest(username, password) { !$0.isEmpty && $1.count >= 8 }
/// valid.execute { print($0) }
/// username.send("ada")          // any thread
/// ```
///
/// The subject runs from its creation until ``complete()`` or ``fail(_:)`` (or a cancel), so it is a
/// ready input for any graph; it is never cancelled for lack of consumers. Events are kept in send
/// order, whatever the thread; what an observer attaching later gets is the subject's `replay`
/// (``ReplayPolicy/latest`` by default, like a current-value subject; ``ReplayPolicy/all`` for a full
/// replay subject; ``ReplayPolicy/none`` for a plain hot subject). Observers get events as for any
/// command: on their context, in order, one at a time. Sends after the terminal event are ignored
/// with a diagnostic.
public final class CommandSubject<Output: Sendable>: Command<Output>, @unchecked Sendable {
    // `@unchecked Sendable`: the only state of its own, `sink`, is guarded by its lock.

    // The run's sink, set while `init` runs the subject in place (no queue hop, so nothing can be
    // sent before it exists); released when the subject is cancelled.
    private let sink = Locked<CommandResult<Output>?>(nil)

    /// A subject keeping `replay` for late observers; it is running when `init` returns.
    public init(replay: ReplayPolicy = .latest) {
        super.init()
        self.replay = replay
        InlineExecution.$isOn.withValue(true) { start() }
    }

    public override func run(_ result: CommandResult<Output>) -> (any Cancelable)? {
        sink.withLock { $0 = result }
        return BlockCancelable { [sink] in sink.withLock { $0 = nil } }
    }

    /// Sends a value to every observer; any thread.
    public func send(_ value: Output) { forward(.value(value)) }

    /// Ends the subject successfully.
    public func complete() { forward(.completed) }

    /// Ends the subject with an error.
    public func fail(_ error: any Error) { forward(.failed(error)) }

    /// Sends outside the lock: an `.immediate` observer may send to this subject again.
    private func forward(_ event: CommandEvent<Output>) {
        guard let result = sink.withLock({ $0 }) else {
            return diagnose(.alreadyFinished, "an event was sent to a subject that was cancelled; it is ignored.")
        }
        switch event {
        case .value(let value): result.send(value)
        case .completed: result.complete()
        case .failed(let error): result.fail(error)
        case .cancelled(let error): result.cancel(error)
        }
    }
}
