import Foundation

// The hand-over half of the state machine: where a ready command goes (its queue, an admission slot,
// in place, or the `start()` that is starting it) and the queue it is given. One decision,
// ``CommandStateMachine/place(makeQueue:admitting:)``, reached from every path that makes a command
// ready: the execute walk's registration (no dependency), a dependency's end, and the gate's opening.
extension CommandStateMachine {
    /// The command's queue settings (not part of the lifecycle, but guarded by the same lock).
    struct QueueSettings: Sendable {
        // Word-wide fields first, the flags together last (58 bytes in declaration order, 38 so).
        /// The command's ``Command/executeQueue``, once it has one.
        var executeQueue: OperationQueue?
        var underlying: DispatchQueue?
        /// The engine queue the command object itself was added to: that queue's `start()` runs it,
        /// and an ending before then waits for it (Foundation requires the queue to start it). Kept
        /// after `queue` is given back to the pool.
        var holder: ObjectIdentifier?
        /// The ``Admission`` slot (a quality of service's raw value: -1 to 33) the command holds until
        /// it starts; one byte, so the settings fit in four words.
        var admission: Int8?
        var ownsQueue = true
        /// `queue` is the user's queue that called `start()` and runs the command: let go of it when
        /// the command ends (a command must not keep its caller's queue alive).
        var borrowed = false
        /// The queue came from (and goes back to) the ``QueuePool``.
        var pooled = false
        /// The command was handed to `queue`: replacing it now has no effect.
        var handedOver = false
        /// A combinator node: its run only subscribes to its inputs, so once ready it runs in place on
        /// the thread that made it ready (through ``Trampoline/wiring``) instead of on a queue, unless
        /// a queue or underlying queue was assigned. Its observers are wired before `execute` returns.
        var inPlace = false
        /// A ready-value command (`just`, `empty`, `fail`): a combinator subscribing to it while
        /// nothing else touched it reads its stored outcome instead of running it.
        var readyValue = false
        /// No queue was assigned or made yet and no underlying queue set: the command will run on
        /// a queue the engine makes, so it goes through ``Admission``.
        var isEngineMade: Bool { executeQueue == nil && underlying == nil }
    }

    /// How a ready command reaches its queue.
    enum Placement: Sendable {
        /// Add it to this queue now.
        case queue(OperationQueue)
        /// Ask ``Admission`` for a slot first; no queue was made yet.
        case admission
        /// Run it in place (a combinator node; see ``QueueSettings/inPlace``).
        case inPlace
        /// `start()` started it (a queue of yours, or by hand): run it inside that call if it is still
        /// on this thread's stack, else hand it to its queue (``handOver(makeQueue:)``). Nothing is
        /// marked yet: the caller decides, outside the lock.
        case startedByCaller
    }

    /// Where the ready command goes: the one hand-over decision. A command `start()` started goes back
    /// to that call; a combinator node runs in place; a command whose queue the engine makes asks
    /// ``Admission`` for a slot (when `admitting`: not for a continuation on its dependency's lane, nor
    /// in inline execution); any other gets its queue now (made if needed, marked handed over).
    @inline(__always)
    mutating func place(makeQueue: () -> OperationQueue, admitting: Bool) -> Placement {
        if startedExternally { return .startedByCaller }
        if queue.inPlace && queue.isEngineMade {
            queue.handedOver = true
            return .inPlace
        }
        if admitting && queue.isEngineMade { return .admission }
        return .queue(handOver(makeQueue: makeQueue))
    }

    /// Admitted with `slot`: the queue to hand the command to.
    @inline(__always)
    mutating func handOverAdmitted(slot: Int, makeQueue: () -> OperationQueue) -> OperationQueue {
        queue.admission = Int8(truncatingIfNeeded: slot)
        return handOver(makeQueue: makeQueue)
    }

    /// The admission slot held, released when the command starts.
    @inline(__always)
    mutating func takeAdmission() -> Int? {
        defer { queue.admission = nil }
        return queue.admission.map(Int.init)
    }

    /// The queue to hand the command to, made if needed; marks it handed over.
    @inline(__always)
    mutating func handOver(makeQueue: () -> OperationQueue) -> OperationQueue {
        queue.handedOver = true
        if let existing = queue.executeQueue { return existing }
        let made: OperationQueue
        if let underlying = queue.underlying {
            // The user's dispatch queue: a plain queue of our own, not pooled.
            made = QueuePool.queue(on: underlying)
            queue.pooled = false
        } else {
            made = makeQueue()
            queue.pooled = true
        }
        if let name { made.name = name }
        queue.executeQueue = made
        queue.ownsQueue = true
        return made
    }

}
