import Dispatch
import Foundation

/// Where an observer's callbacks run.
///
/// ``Command/execute(on:_:)-(_,(CommandEvent<Output>)->Void)`` captures ``current`` unless it is given a context. Whatever the context,
/// one observer's events arrive in the order they were sent, one at a time (never two at once, even on
/// a concurrent queue), and the terminal event comes last. A burst of events costs one hop: the
/// observer's mailbox is drained in one scheduled block.
///
/// - `.queue(q)`: `q.async`.
/// - `.operationQueue(q)`: `q.addOperation`.
/// - `.runLoop(loop, mode:)`: handed to `loop` in `mode` and the loop woken (on Apple platforms with
///   `CFRunLoopPerformBlock` and `CFRunLoopWakeUp`; on Linux with a zero-interval `Timer`, since
///   `RunLoop.perform` alone does not wake the loop there). Delivered only while someone runs that
///   loop in that mode; a loop nobody runs never delivers (the events wait, nothing is lost or crashes).
/// - `.immediate`: on the thread that produced the event, before the outermost `send`/`complete` on
///   that thread returns. A delivery triggered from inside an immediate callback runs in place, nested,
///   while the nesting has used less than 64 KiB of stack, and beyond that is queued and runs right
///   after the callback returns (a per-thread loop, so a 10,000-stage chain does not grow the stack
///   past that bound: about 100 kept stages of a release build); if the observer
///   is already being delivered to (on this thread or another), that delivery picks the event up.
///   One observer's events keep their order and never overlap; the order *between* observers is not
///   specified. Use it for cheap, thread-safe handlers; combinators use it.
public struct CallbackContext: Sendable, CustomStringConvertible {
    enum Kind: @unchecked Sendable {
        // `RunLoop` is not Sendable; it is only handed to `Platform.perform(on:mode:_:)`, which uses
        // CoreFoundation's thread-safe calls, and never read otherwise. That is the only reason for
        // `@unchecked`.
        case queue(DispatchQueue)
        case operationQueue(OperationQueue)
        /// Boxed: the loop and its mode inline made every context 25 bytes, and an observer's record
        /// (which keeps its context) 64 instead of 40.
        case runLoop(RunLoopTarget)
        case immediate
    }

    /// A run loop and the mode to run callbacks in.
    final class RunLoopTarget: @unchecked Sendable {
        // `@unchecked Sendable`: immutable; the loop is only handed to `Platform.perform(on:mode:_:)`
        // (see `Kind`).
        let loop: RunLoop
        let mode: RunLoop.Mode

        init(_ loop: RunLoop, _ mode: RunLoop.Mode) { (self.loop, self.mode) = (loop, mode) }
    }

    let kind: Kind

    /// Callbacks are submitted with `queue.async`.
    public static func queue(_ queue: DispatchQueue) -> CallbackContext { CallbackContext(kind: .queue(queue)) }

    /// Callbacks are submitted with `queue.addOperation`.
    public static func operationQueue(_ queue: OperationQueue) -> CallbackContext {
        CallbackContext(kind: .operationQueue(queue))
    }

    /// Callbacks run on `runLoop`, in `mode`, while someone runs it.
    public static func runLoop(_ runLoop: RunLoop, mode: RunLoop.Mode = .default) -> CallbackContext {
        CallbackContext(kind: .runLoop(RunLoopTarget(runLoop, mode)))
    }

    /// Callbacks run on the producing thread.
    public static let immediate = CallbackContext(kind: .immediate)

    /// The main queue.
    public static var main: CallbackContext { .queue(.main) }

    /// The context of the calling code, as `execute` captures it:
    /// 1. on the main queue (detected with a `DispatchSpecificKey`, so it also works under
    ///    `dispatchMain()` and an `async` main, where `Thread.isMainThread` is false) or the main
    ///    thread: the main queue;
    /// 2. inside an `Operation` run by an `OperationQueue`: that queue;
    /// 3. on a `DispatchQueue` made known with ``register(_:)``: that queue;
    /// 4. on a thread whose `RunLoop` is running: that run loop, in its current mode;
    /// 5. otherwise (the Dispatch pool, the Swift concurrency pool, a bare thread): the default global
    ///    queue; one observer's events are still delivered one at a time
    ///    and in order there, so it behaves as a private serial queue without allocating one.
    public static var current: CallbackContext {
        if isMainQueue {
            return .queue(.main)
        }
        if let queue = OperationQueue.current {
            return .operationQueue(queue)
        }
        if let box = DispatchQueue.getSpecific(key: ContextKeys.registered), let queue = box.object {
            return .queue(queue)
        }
        let loop = RunLoop.current
        if let mode = loop.currentMode {
            return .runLoop(loop, mode: mode)
        }
        return .queue(.global())
    }

    /// True on the main queue, including under `dispatchMain()` and an `async` main, where
    /// `Thread.isMainThread` is false for main-queue blocks on Linux.
    public static var isMainQueue: Bool {
        DispatchQueue.getSpecific(key: ContextKeys.main) != nil || Thread.isMainThread
    }

    /// Makes `queue` recognisable by ``current``: code running on it (or on a queue targeting it) then
    /// gets its callbacks on `queue`. Dispatch offers no way to ask for the current queue, so queues
    /// you own must be registered once. The registration holds `queue` weakly.
    public static func register(_ queue: DispatchQueue) {
        queue.setSpecific(key: ContextKeys.registered, value: Weak(queue))
    }

    /// Runs `block` in this context.
    func schedule(_ block: @escaping @Sendable () -> Void) {
        switch kind {
        case .queue(let queue):
            queue.async(execute: block)
        case .operationQueue(let queue):
            queue.addOperation(block)
        case .runLoop(let target):
            Platform.perform(on: target.loop, mode: target.mode, block)
        case .immediate:
            Trampoline.run(block)
        }
    }

    var isImmediate: Bool {
        if case .immediate = kind { return true }
        return false
    }

    public var description: String {
        switch kind {
        case .queue(let queue): return "queue(\(queue.label))"
        case .operationQueue(let queue): return "operationQueue(\(queue.name ?? "unnamed"))"
        case .runLoop(let target): return "runLoop(\(target.mode.rawValue))"
        case .immediate: return "immediate"
        }
    }
}

enum ContextKeys {
    /// Set on `DispatchQueue.main` once, the first time this file is used.
    static let main: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()

    static let registered = DispatchSpecificKey<Weak<DispatchQueue>>()
}
