import Dispatch
import Foundation

/// Idle `OperationQueue`s kept for reuse: making one costs about 2 us (a lane, a `DispatchQueue`
/// more); a command's own queue is handed back here when the command ends and given to the next
/// command that becomes ready. A queue serves one command at a time, so every command still runs on
/// its own queue. Only the engine's own queues are pooled (never one with a user's underlying
/// queue); at most `limit` of each kind per quality of service.
///
/// Two kinds. A command that becomes ready because its dependency just ended on this thread is the
/// continuation of that work: the first such dependent of a finishing command takes a
/// ``LaneQueue``, the others and every command made ready by `execute` take a plain queue (which
/// runs on the global queue: many of them drain with few thread wake-ups). The lane pool is last
/// in, first out, and a command hands its queue back *before* it tells its dependents it ended, so
/// in a chain the dependent usually takes the very lane its dependency is still returning on: it is
/// queued behind that `start()` and runs next on the same thread, without waking another one
/// (about 30% of a chain's time here). Independent commands still run in parallel: only the first
/// dependent made ready by one ending continues on its lane.
enum QueuePool {
    private static let limit = 256
    /// By quality of service (``kind(_:)``): arrays, not dictionaries keyed by the raw value, whose
    /// `subscript(_:default:)` writes allocated their accessor's frame on the heap (a `malloc` a
    /// command of a chain).
    private struct Idle {
        var plain: [[OperationQueue]] = Array(repeating: [], count: 5)
        var lanes: [[LaneQueue]] = Array(repeating: [], count: 5)
    }

    /// The index of a quality of service in ``Idle``'s arrays.
    private static func kind(_ qualityOfService: QualityOfService) -> Int {
        switch qualityOfService {
        case .userInteractive: return 0
        case .userInitiated: return 1
        case .utility: return 2
        case .background: return 3
        default: return 4
        }
    }
    // Guards the idle queues, by kind and quality of service.
    private static let idle = Locked<Idle>(Idle())

    /// An idle queue for `qualityOfService` (a lane queue if `lane`), or a new one.
    static func take(_ qualityOfService: QualityOfService, lane: Bool) -> OperationQueue {
        let kind = kind(qualityOfService)
        if lane {
            if let queue = idle.withLock({ $0.lanes[kind].popLast() }) { return queue }
            return LaneQueue(qualityOfService: qualityOfService)
        }
        if let queue = idle.withLock({ $0.plain[kind].popLast() }) { return queue }
        let queue = OperationQueue()
        queue.qualityOfService = qualityOfService
        // Straight onto the global queue (never released, so Foundation's `unowned(unsafe)` is safe):
        // a queue of its own would target libdispatch's overcommit pool, which gives every busy
        // queue a thread (+260 threads for 10,000 commands made ready at once, measured).
        queue.underlyingQueue = DispatchQueue.global(qos: DispatchQoS(qualityOfService).qosClass)
        return queue
    }

    /// An `OperationQueue` running on the user's `underlying` queue (not pooled). For the main queue,
    /// `OperationQueue.main` itself: Apple forbids the main queue as an `underlyingQueue` ("The value
    /// of this property must not be the value returned by dispatch_get_main_queue"). The main queue is
    /// recognised by a key set on it (`DispatchQueue`s cannot be compared with `===` on Linux).
    static func queue(on underlying: DispatchQueue) -> OperationQueue {
        if underlying.getSpecific(key: ContextKeys.main) != nil { return .main }
        let queue = OperationQueue()
        queue.underlyingQueue = underlying
        return queue
    }

    /// Returns a queue the engine made, if it is idle: not suspended, and holding nothing but what the
    /// engine put there for `command` (the command object, or the ``StartOperation`` running it now).
    /// A queue a `run` suspended, or one holding anyone else's operation (one a `run` added to its
    /// ``Command/executeQueue``, still queued or running), stays the command's and is dropped: the
    /// next command given it would wait behind that operation. Lanes follow the same rule.
    static func recycle(_ queue: OperationQueue, named: Bool, finishing command: Operation) {
        guard !queue.isSuspended else { return }
        // Usually empty (the command object left the queue when it posted `isFinished`): the list is
        // only read when something is still there.
        if queue.operationCount > 0 {
            guard queue.operations.allSatisfy({ $0 === command || $0 is StartOperation }) else { return }
        }
        if named { queue.name = nil }
        let kind = kind(queue.qualityOfService)
        if let lane = queue as? LaneQueue {
            idle.withLock { idle in
                if idle.lanes[kind].count < limit { idle.lanes[kind].append(lane) }
            }
        } else {
            idle.withLock { idle in
                if idle.plain[kind].count < limit { idle.plain[kind].append(queue) }
            }
        }
    }
}

/// The block the engine adds to a command's queue to start it (when a queue of the user's may hold the
/// command object itself): known by its type, so ``QueuePool/recycle(_:named:finishing:)`` can tell
/// it from a user's operation.
final class StartOperation: BlockOperation, @unchecked Sendable {
    // No state of its own: `BlockOperation` guards its blocks.
}

/// A command's own `OperationQueue`, running on a serial `DispatchQueue` it keeps alive (Foundation
/// holds `underlyingQueue` `unowned(unsafe)`). It serves one command at a time, so being serial costs
/// nothing; operations a user adds to a command's ``Command/executeQueue`` run one at a time.
final class LaneQueue: OperationQueue, @unchecked Sendable {
    // Immutable after init; `OperationQueue` guards its own state.
    /// The serial queue this queue runs on, targeting the global queue of its quality of service.
    let lane: DispatchQueue

    init(qualityOfService: QualityOfService) {
        // Targets the global queue explicitly: not the overcommit pool (see `QueuePool.take`).
        let qos = DispatchQoS(qualityOfService)
        lane = DispatchQueue(label: "AwesomeCommand lane", qos: qos, target: DispatchQueue.global(qos: qos.qosClass))
        super.init()
        self.qualityOfService = qualityOfService
        underlyingQueue = lane
        lane.setSpecific(key: Self.identity, value: ObjectIdentifier(self))
    }

    /// Set on each lane's `DispatchQueue`: the lane queue it runs. Read by a command's `start()` (see
    /// ``running``).
    private static let identity = DispatchSpecificKey<ObjectIdentifier>()

    /// The lane queue running the current thread's work, when it is one: read from the lane's
    /// `DispatchQueue` (a thread-local read), where `OperationQueue.current` asks first whether this
    /// is the main thread, which Foundation answers on Linux with two system calls (`getpid`,
    /// `gettid`) for every command a chain starts. Only the engine's own operations run on a lane, so
    /// inside one this is the queue `OperationQueue.current` names.
    static var running: ObjectIdentifier? { DispatchQueue.getSpecific(key: identity) }
}

extension DispatchQoS {
    /// The Dispatch class for a Foundation quality of service.
    init(_ qualityOfService: QualityOfService) {
        switch qualityOfService {
        case .userInteractive: self = .userInteractive
        case .userInitiated: self = .userInitiated
        case .utility: self = .utility
        case .background: self = .background
        default: self = .default
        }
    }
}
