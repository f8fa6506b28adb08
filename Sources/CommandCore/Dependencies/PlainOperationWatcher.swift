import Dispatch
import Foundation

/// Watches plain `Operation`s (a `BlockOperation`, an operation of your own) for the engine: tells a
/// command that one it depends on finished, and runs those the engine must run itself (a group's plain
/// child, a condition's plain dependency) on the library's one queue for them.
///
/// Foundation posts no observable KVO on Linux, and an operation's `completionBlock` belongs to its
/// owner (wrapping it broke when two commands watched one operation, or when the owner set it
/// later). Instead, a small `BlockOperation` that depends on the watched operation alone waits on one
/// shared queue of the library's, and Foundation's own readiness starts it when the operation
/// finishes (or, cancelled, is started by its queue and finishes). The watcher holds the command
/// until then: a command keeps waiting for its dependencies even if nobody else holds it.
///
/// Cost: one `BlockOperation` per plain dependency of an executed command. The shared queue scans
/// its waiting watchers on each change (Foundation's scheduler is linear in the operations it holds),
/// so plain dependencies suit tens or hundreds of operations, not a million; a graph of commands
/// does not use this.
package enum PlainOperationWatcher {
    private static let queue: OperationQueue = {
        let queue = OperationQueue()
        queue.name = "AwesomeCommand plain-operation watcher"
        queue.underlyingQueue = DispatchQueue.global()
        return queue
    }()

    /// Plain operations the engine runs itself: no dependency of the engine's to wait for.
    private static let runQueue: OperationQueue = {
        let queue = OperationQueue()
        queue.name = "AwesomeCommand plain operations"
        return queue
    }()

    /// Runs `operation` on the library's queue for plain operations, unless it already runs or
    /// finished (someone else started it: it is left to them).
    package static func start(_ operation: Operation) {
        if !operation.isExecuting && !operation.isFinished { runQueue.addOperation(operation) }
    }

    /// Calls `finished` once, on a global queue (or right here, if `operation` already finished), after
    /// `operation` finished.
    package static func watch(_ operation: Operation, finished: @escaping @Sendable () -> Void) {
        let once = OnceFlag()
        let notify: @Sendable () -> Void = {
            if once.take() { finished() }
        }
        if operation.isFinished { return notify() }
        let watcher = BlockOperation(block: notify)
        watcher.addDependency(operation)
        queue.addOperation(watcher)
        // Foundation reads a new operation's readiness before adopting it: a dependency finishing in
        // between is noticed only at the queue's next change. Check once more.
        if operation.isFinished { notify() }
    }
}

/// True for the first caller of `take()` only.
final class OnceFlag: Sendable {
    // Guards the flag.
    private let done = Locked(false)
    func take() -> Bool {
        done.withLock { done in
            defer { done = true }
            return !done
        }
    }
}
