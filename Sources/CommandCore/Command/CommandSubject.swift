/// A command whose events its owner sends from outside (the original's `subject:`; ReactiveCocoa's
/// `RACSubject` / `RACReplaySubject`): a text field's changes, a socket's messages, fed into a graph.
///
/// ```swift
/// import CommandCore
///
/// let username = CommandSubject<String>(replay: .latest)
/// username.execute { print($0) }  // value("ada"), then completed
/// username.send("ada")             // any thread
/// username.complete()
/// ```
///
/// With `import CommandGraph`, subjects feed combinators:
/// `combineLatest(username, password) { !$0.isEmpty && $1.count >= 8 }`.
///
/// The subject runs from its creation until ``complete()`` or ``fail(_:)`` (or a cancel), so it is a
/// ready input for any graph; it is never cancelled for lack of consumers. Events are kept in send
/// order, whatever the thread; what an observer attaching later gets is the subject's `replay`
/// (``ReplayPolicy/latest`` by default, like a current-value subject; ``ReplayPolicy/all`` for a full
/// replay subject; ``ReplayPolicy/none`` for a plain hot subject). Observers get events as for any
/// command: on their context, in order, one at a time. Sends after the terminal event are ignored
/// with a diagnostic.
public final class CommandSubject<Output: Sendable>: Command<Output>, @unchecked Sendable {
    // `@unchecked Sendable`: no state of its own; the command's state is guarded by its lock.

    /// A subject keeping `replay` for late observers; it is running when `init` returns (it runs in
    /// place, with no queue hop, so nothing can be sent before it runs).
    public init(replay: ReplayPolicy = .latest) {
        super.init()
        self.replay = replay
        machine.withLock { $0.startAtCreation() }
    }

    /// The subject sends through itself, not through the result, which it does not keep: a kept
    /// result would keep the subject alive forever (the result holds its command).
    public override func run(_ result: CommandResult<Output>) -> (any Cancelable)? { nil }

    /// Releasing the result is normal for a subject (see `run`), not an abandoned run.
    override func resultReleased() {}

    /// Sends a value to every observer; any thread.
    public func send(_ value: Output) { receive(value) }

    // These hold no lock of their own: an `.immediate` observer may send to this subject again. No
    // `CommandEvent<Output>` is built: in this unspecialised generic class each would look its
    // metadata up in the runtime's hash table (about 300 instructions).

    /// Ends the subject successfully.
    public func complete() { receiveTerminal(.completed, event: "complete()") }

    /// Ends the subject with an error.
    public func fail(_ error: any Error) { receiveTerminal(.failed(error), event: "fail(\(error))") }
}
