import Dispatch
import Foundation

/// Watches a command's lifecycle (ProcedureKit's `ProcedureObserver`, the "Advanced NSOperations"
/// `OperationObserver`): added with ``Command/add(observer:)``. Every method has an empty default.
///
/// **Order and threads.** Each callback once, on the thread where that step happens, in this order:
/// ``willExecute(_:)`` (conditions passed, categories held, on the command's queue right before
/// `run`), ``didExecute(_:)`` (`run` returned; the work may go on), ``willFinish(_:state:)`` (the
/// terminal state is decided, before any dependent is told or can start, before `isFinished`),
/// ``didFinish(_:state:)`` (after the terminal event was queued for the command's observers); a
/// command that ends inside `run` (it sends its terminal event before `run` returns) gets `willFinish`
/// and `didFinish` there, before `didExecute`. Observers are called in the order they were added. A
/// command cancelled (or failed by a dependency) before it ran gets no `willExecute`/`didExecute`,
/// only `willFinish` and `didFinish`. An observer added after the command ended gets `didFinish` at
/// once, on the adding thread; added while it runs, it gets the steps still to come.
///
/// ``didReportProgress(_:completed:of:)`` is called each time the command's run reports progress
/// (`CommandResult.reportProgress`), on the reporting thread, between `willExecute` and `willFinish`:
/// the way to follow progress where `Progress` has no key-value observing (Linux).
///
/// No lock of the command is held during a callback: an observer may read the command, cancel it, or
/// add observers. A callback that blocks delays the command's next step (and, in `willFinish`, its
/// dependents).
public protocol CommandObserver: Sendable {
    /// Conditions passed and categories held; `run` is about to be called.
    func willExecute(_ command: Operation)
    /// `run` returned.
    func didExecute(_ command: Operation)
    /// The terminal state is decided; no dependent has started because of it yet.
    func willFinish(_ command: Operation, state: CommandState)
    /// The command ended and its terminal event was queued for its observers.
    func didFinish(_ command: Operation, state: CommandState)
    /// The run reported `completed` units of `total` (a `total` of 0 or less: not known yet).
    func didReportProgress(_ command: Operation, completed: Int64, of total: Int64)
}

extension CommandObserver {
    public func willExecute(_ command: Operation) {}
    public func didExecute(_ command: Operation) {}
    public func willFinish(_ command: Operation, state: CommandState) {}
    public func didFinish(_ command: Operation, state: CommandState) {}
    public func didReportProgress(_ command: Operation, completed: Int64, of total: Int64) {}
}

/// An observer made of closures, each optional: `BlockObserver(willExecute: { _ in }, didFinish: {
/// command, state in })`. Where and when each runs: see ``CommandObserver``.
public struct BlockObserver: CommandObserver {
    private let onWillExecute: (@Sendable (Operation) -> Void)?
    private let onDidExecute: (@Sendable (Operation) -> Void)?
    private let onWillFinish: (@Sendable (Operation, CommandState) -> Void)?
    private let onDidFinish: (@Sendable (Operation, CommandState) -> Void)?
    private let onDidReportProgress: (@Sendable (Operation, Int64, Int64) -> Void)?

    public init(
        willExecute: (@Sendable (Operation) -> Void)? = nil, didExecute: (@Sendable (Operation) -> Void)? = nil,
        willFinish: (@Sendable (Operation, CommandState) -> Void)? = nil,
        didFinish: (@Sendable (Operation, CommandState) -> Void)? = nil,
        didReportProgress: (@Sendable (Operation, _ completed: Int64, _ total: Int64) -> Void)? = nil
    ) {
        onWillExecute = willExecute
        onDidExecute = didExecute
        onWillFinish = willFinish
        onDidFinish = didFinish
        onDidReportProgress = didReportProgress
    }

    public func willExecute(_ command: Operation) { onWillExecute?(command) }
    public func didExecute(_ command: Operation) { onDidExecute?(command) }
    public func willFinish(_ command: Operation, state: CommandState) { onWillFinish?(command, state) }
    public func didFinish(_ command: Operation, state: CommandState) { onDidFinish?(command, state) }
    public func didReportProgress(_ command: Operation, completed: Int64, of total: Int64) {
        onDidReportProgress?(command, completed, total)
    }
}

/// Cancels the command it observes if it has not ended `interval` after its run began (from
/// ``CommandObserver/willExecute(_:)``), as `cancel()` does but with a `CommandError` of code
/// ``CommandError/Code/timedOut`` naming the command and the interval.
///
/// The wait is a timer of `scheduler` (``DispatchScheduler/shared`` by default: it blocks no thread;
/// a ``VirtualScheduler`` in tests), the same mechanism as the `timeout` operator of `CommandGraph`.
/// The cancel runs on the scheduler's thread. A command that ends first cancels nothing; a command that
/// never runs (cancelled before) starts no timer. An interval too long for a timer (beyond about 292
/// years) waits that long; a negative one cancels at once.
public struct TimeoutObserver: CommandObserver {
    public let interval: Duration
    /// The scheduler whose timer measures the interval.
    public let scheduler: any CommandScheduler

    public init(after interval: Duration, scheduler: any CommandScheduler = DispatchScheduler.shared) {
        self.interval = interval
        self.scheduler = scheduler
    }

    public func willExecute(_ command: Operation) {
        let target = Weak<Operation>(command)
        let interval = interval
        _ = scheduler.schedule(after: interval) {
            (target.object as? any TimesOut)?.timeOut(after: interval)
        }
    }
}

/// What ``TimeoutObserver`` cancels: a command, whatever its output type.
protocol TimesOut: AnyObject {
    /// Cancels the command with a `timedOut` error naming `interval`.
    func timeOut(after interval: Duration)
}

extension Command: TimesOut {
    func timeOut(after interval: Duration) {
        let error = CommandError(
            code: .timedOut, command: displayName,
            message: "'\(displayName)' did not end within \(interval) (a TimeoutObserver cancelled it).")
        if let ending = machine.withLock({ $0.terminate(.cancelled(error), word: $1) }) { perform(ending) }
    }
}

extension Command {
    /// Adds `observer`; see ``CommandObserver`` for when and where it is called. Added after the
    /// command ended, it gets ``CommandObserver/didFinish(_:state:)`` at once, on this thread.
    public func add(observer: some CommandObserver) {
        let ended = machine.withLock { machine -> CommandState? in
            if let outcome = machine.outcome { return outcome.state }
            machine.lifecycleObservers.append(observer)
            return nil
        }
        if let ended { observer.didFinish(self, state: ended) }
    }

    /// The observers added, in order.
    public var observers: [any CommandObserver] { machine.withLock { $0.lifecycleObservers } }
}
