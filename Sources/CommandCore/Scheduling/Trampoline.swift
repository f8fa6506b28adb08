internal import CommandAtomics

/// Runs nested work with a loop per thread instead of nesting it.
///
/// A value sent at the head of a 10,000-stage `map` chain is delivered stage by stage on the
/// producing thread. Nested calls would grow the stack by a few frames per stage and overflow it
/// (OpenCombine crashes near 580 stages here). Instead, the first call on a thread runs a loop; a
/// call made from inside it is queued (FIFO) and run by that loop once the current one returns. Each
/// observer's own order is kept by its mailbox; the stack depth stays constant. For ``deliveries``
/// only, a value handed to an idle observer may also run in place, nested in the loop, while the
/// nesting has used less than ``nestingBudget`` bytes of stack (``deliverNow(on:_:)``): cheaper (no
/// queue entry, no second lock), still bounded.
///
/// Three independent loops: ``deliveries`` for `.immediate` deliveries, ``cancels`` for a cancel
/// walking up a chain (cancelling the last of 10,000 stages cancels its input, which cancels its
/// input...: about 11 frames a stage, which overflowed a 512 KiB thread at 390 stages), ``wiring`` for
/// combinator nodes run in place (each subscribes to its input, which runs in place and subscribes to
/// its own...).
package final class Trampoline: Sendable {
    /// Per-thread state; only touched by its own thread.
    ///
    /// `@exclusivity(unchecked)`: only its own thread touches it, and never re-entrantly (a nested
    /// `run` only appends); the runtime's dynamic exclusivity check cost about a tenth of a send.
    final class Queue {
        @exclusivity(unchecked) var blocks: [Entry] = []
        @exclusivity(unchecked) var head = 0
        @exclusivity(unchecked) var running = false
        /// The lowest stack address at which a delivery may still start nested in the running loop: the
        /// loop's own frame less ``Trampoline/nestingBudget``; 0 while no loop runs (anything may run
        /// now: it becomes the loop), `UInt.max` inside ``Trampoline/queueing(_:)`` (nothing may).
        /// Stacks grow down on every platform this package supports.
        @exclusivity(unchecked) var stackFloor: UInt = 0
        /// Inside ``Trampoline/queueing(_:)``: nothing may be delivered in place.
        @exclusivity(unchecked) var queueingOnly = 0
    }

    /// How much stack, in bytes below the running loop's frame, deliveries may use nested in it before
    /// the next one is queued: a value going down a chain is handed from stage to stage in place (no
    /// queue, no second lock) while the stack has room, so the stack stays bounded whatever the
    /// chain's length. Bytes, not levels, because a level's frame varies tenfold: a kept `map` stage
    /// measured 544 bytes in a release build and 2.2 KiB in a debug build, and a fused node runs up to
    /// 32 stage closures nested in its level (32 levels of those overflowed a 512 KiB thread under
    /// AddressSanitizer). The check is made before each level, so the stack used is at most this
    /// plus one level: 64 KiB keeps a 512 KiB thread (Apple's secondary threads) far from its end in
    /// every build, and lets about 100 kept stages of a release build nest before the value goes
    /// through the queue (about 2,000 instructions each time, callgrind).
    static let nestingBudget: UInt = 64 * 1024

    /// Queued work: a block, or an observer's drain (the command, held until it ran, and the
    /// observer: nothing allocated per value, and no drain function made per command).
    enum Entry {
        case block(@Sendable () -> Void)
        case drain(CommandNode, UInt64)

        @inline(__always)
        func callAsFunction() {
            switch self {
            case .block(let block): block()
            case .drain(let drainer, let observer): drainer.drainImmediately(observer)
            }
        }
    }

    private let perThread: ThreadLocal<Queue>

    private init(slot: Int32? = nil) {
        perThread = ThreadLocal(slot: slot) { Queue() }
    }

    /// `.immediate` deliveries (this thread's queue in the fast slot kept for it: see
    /// ``deliveriesQueue``).
    static let deliveries = Trampoline(slot: COMMAND_DELIVERIES_SLOT)
    /// Cancels of a run's cancelable (which cancel inputs, which cancel theirs...).
    static let cancels = Trampoline()
    /// Runs of combinator nodes started in place (whose run subscribes to inputs, which start theirs...).
    static let wiring = Trampoline()

    static func run(_ block: @escaping @Sendable () -> Void) { deliveries.run(block) }

    /// This thread's queue, for ``mayDeliverNow(_:)`` and ``deliverNow(on:_:)``; not retained (the
    /// thread keeps it until it exits): no retain and release per value.
    @inline(__always)
    var queue: Unmanaged<Queue> { perThread.unretained }

    /// This thread's queue of ``deliveries``, read from its fast slot by index: no global's
    /// initialisation check (`swift_once`) per value; the first use on a thread makes it.
    @inline(__always)
    static var deliveriesQueue: Unmanaged<Queue> {
        if let pointer = command_thread_slot_get(COMMAND_DELIVERIES_SLOT) { return Unmanaged.fromOpaque(pointer) }
        return deliveries.queue
    }

    /// Whether a delivery may run right now, in place, on this thread: no loop runs (it becomes the
    /// loop), or one runs and nesting is allowed (the stack above its floor, not inside
    /// ``queueing(_:)``): one comparison.
    @inline(__always)
    static func mayDeliverNow(_ queue: Unmanaged<Queue>) -> Bool {
        queue._withUnsafeGuaranteedRef { queue in command_stack_address() > queue.stackFloor }
    }

    /// This thread becomes the loop: no nested delivery below the budget (none at all inside
    /// ``queueing(_:)``).
    @inline(__always)
    private static func begin(_ queue: Queue) {
        queue.running = true
        let here = command_stack_address()
        queue.stackFloor = queue.queueingOnly > 0 ? UInt.max : here - min(here, nestingBudget)
    }

    /// Runs `body` now, after ``mayDeliverNow(_:)`` said so: nested in the running loop, or as the
    /// loop, which then runs what `body` queued.
    @inline(__always)
    static func deliverNow(on queue: Unmanaged<Queue>, _ body: () -> Void) {
        let nested = beginDeliveryNow(on: queue)
        body()
        if !nested { endDeliveryNow(on: queue) }
    }

    /// ``deliverNow(on:_:)`` in two halves, for the value path (`Command.receive`, where the closure
    /// was a function of its own): before the delivery, true when it runs nested in this thread's
    /// running loop; false when this call made the thread the loop, and the caller then calls
    /// ``endDeliveryNow(on:)`` after it.
    @inline(__always)
    static func beginDeliveryNow(on queue: Unmanaged<Queue>) -> Bool {
        queue._withUnsafeGuaranteedRef { queue in
            if queue.running { return true }
            begin(queue)
            return false
        }
    }

    /// After a delivery that made this thread the loop (``beginDeliveryNow(on:)`` returned false):
    /// runs what it queued, then ends the loop.
    @inline(__always)
    static func endDeliveryNow(on queue: Unmanaged<Queue>) {
        queue._withUnsafeGuaranteedRef { drainQueued($0) }
    }

    /// Runs `body` with in-place deliveries off on this thread: what it sends is queued. For a node
    /// that sends while holding its own lock (user code must not run under it).
    package static func queueing<Result>(_ body: () throws -> Result) rethrows -> Result {
        let queue = deliveries.perThread.current
        queue.queueingOnly += 1
        let floor = queue.stackFloor
        if queue.running { queue.stackFloor = UInt.max }
        defer {
            queue.queueingOnly -= 1
            if queue.running { queue.stackFloor = floor }
        }
        return try body()
    }

    /// True when this thread's loop is running and has queued work waiting.
    var hasQueuedWork: Bool {
        let queue = perThread.current
        return queue.running && queue.head < queue.blocks.count
    }

    func run(_ block: @escaping @Sendable () -> Void) { run(.block(block)) }

    /// Runs `drainer.drainImmediately(observer)` (queued if this thread's loop is running), keeping
    /// `drainer` alive until then.
    func run(drain drainer: CommandNode, _ observer: UInt64) {
        run(.drain(drainer, observer))
    }

    private func run(_ entry: Entry) {
        let queue = perThread.current
        if queue.running {
            queue.blocks.append(entry)
            return
        }
        Self.begin(queue)
        entry()
        Self.drainQueued(queue)
    }

    /// The loop: runs what was queued, in order, then stops running.
    private static func drainQueued(_ queue: Queue) {
        while queue.head < queue.blocks.count {
            let next = queue.blocks[queue.head]
            queue.head += 1
            next()
        }
        // Nothing was queued (a value handed down in place all the way): nothing to empty.
        if !queue.blocks.isEmpty { queue.blocks.removeAll(keepingCapacity: queue.blocks.count <= 256) }
        queue.head = 0
        queue.running = false
        queue.stackFloor = 0
    }
}
