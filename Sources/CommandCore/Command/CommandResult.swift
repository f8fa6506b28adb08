import Foundation

/// The sink a command's `run` reports to: the original's `onNext` / `onComplete` / `onError`.
///
/// A `Sendable` value: copy it into whatever finishes the work and call it from any thread, inside
/// `run` or later. The first terminal call (`complete`, `fail`, `succeed`, or a cancel of the command)
/// wins; anything after it is ignored and reported as a ``CommandDiagnostic`` (never a crash).
///
/// Keep it until the work ends: when the last copy is released without a terminal event, the command
/// fails with ``CommandError/Code/resultAbandoned`` rather than hanging forever.
///
/// Values are passed to observers in the order of the `send` calls (calls from several threads are
/// ordered by the command's lock) and never dropped; see ``ReplayPolicy`` for what is kept for late
/// observers.
public struct CommandResult<Output: Sendable>: Sendable {
    let token: RunToken
    /// The closure of `Command { result in ... }`, taken when the run began (the command releases its
    /// own reference when it ends; every copy of the result keeps it, as the token is kept).
    let body: (@Sendable (CommandResult<Output>) -> (any Cancelable)?)?

    init(_ command: Command<Output>, body: (@Sendable (CommandResult<Output>) -> (any Cancelable)?)?) {
        token = RunToken(command)
        self.body = body
    }

    /// The command being run.
    public var command: Command<Output> { unsafeDowncast(token.command, to: Command<Output>.self) }

    /// Sends a value (the original's `onNext`).
    public func send(_ value: Output) { command.receive(value) }

    /// A value from a combinator node's own plumbing: ignored without a diagnostic once the node
    /// ended (its input may still deliver a value it had claimed).
    package func forward(_ value: Output) { command.receive(value, quietly: true) }

    /// ``forward(_:)`` as a closure that calls the command directly: a stage's value handler ends in
    /// it (one call where `{ link.send($0) }` made three: the closure, the link's `send`, `forward`).
    package var forwarder: @Sendable (Output) -> Void {
        let command = self.command
        return { command.receive($0, quietly: true) }
    }

    /// Ends the run successfully (the original's `onComplete`).
    public func complete() { command.receiveTerminal(.completed, event: "complete()") }

    /// Ends the run with an error (the original's `onError`).
    public func fail(_ error: any Error) { command.receiveTerminal(.failed(error), event: "fail(\(error))") }

    /// Sends `value` and completes: the original's `useEasyResult` / `onSuccess`.
    public func succeed(_ value: Output) { command.receiveSuccess(value) }

    /// Ends the run cancelled with `error` (for combinators whose input was cancelled).
    package func cancel(_ error: CommandError) { command.receiveTerminal(.cancelled(error), event: "cancel()") }

    /// Reports `completed` units of work out of `total` (any thread; the command's ``Command/progress``
    /// and every progress it is a child of follow). The progress is completed when the command ends.
    ///
    /// `completed` is clamped to `0...total`. A `total` of 0 or less (an empty batch, "0 of 0 files",
    /// or a count not known yet) is indeterminate, as Apple's `Progress` reads 0 of 0: the progress
    /// keeps its last report (at first, 0 of 1) until a report with a total, or the command's end.
    ///
    /// The command's lifecycle observers get ``CommandObserver/didReportProgress(_:completed:of:)``
    /// after the progress was updated, on this thread.
    public func reportProgress(completed: Int64, of total: Int64) {
        let command = self.command
        ProgressGuard.report(command.progress, completed: completed, of: total)
        let observers = command.machine.withLock { $0.lifecycleObservers }
        for observer in observers { observer.didReportProgress(command, completed: completed, of: total) }
    }

    /// True once the command was cancelled; long work should check it and stop early.
    public var isCancelled: Bool { command.machine.withLock { $0.isCancelled } }
}

extension CommandResult where Output == Void {
    /// Completes a command whose output is `Void` after sending its single `()` value.
    public func succeed() { succeed(()) }
}

/// The identity of one run; its release without a terminal event ends the run.
///
/// Not generic: a generic token (`RunToken<Output>`) looked its type's metadata up in the runtime's
/// hash table on every run (about 490 instructions a command, callgrind). ``CommandResult`` reads its
/// command back as the `Command<Output>` it made it with (and holds the run's closure itself).
final class RunToken: Sendable {
    /// A `Command<Output>`.
    let command: CommandNode

    init(_ command: CommandNode) {
        self.command = command
    }

    deinit { command.resultReleased() }
}
