import Foundation

/// Bounds how many ready commands wait in the engine's own queues at once, per quality of service.
///
/// Without a bound, a fan-out whose root just ended (or a fan-in executed from its sink) hands a
/// million commands to a million new `OperationQueue`s in one pass: about 1 KiB each and a
/// constructor each, while only a few can run at a time; per-command cost rose by 40-50% between
/// 1k and 1M and the peak resident size was dominated by idle queues. Here, a command made ready
/// takes one of ``limit`` slots of its quality of service and goes to its queue at once, or waits
/// in a first-in, first-out backlog. A slot is freed when its command's `start()` begins, which
/// hands the oldest waiting command of that quality of service to a queue (usually a pooled one).
///
/// Only commands that run on a queue the engine makes are counted: a command whose `executeQueue`
/// or `underlyingQueue` you set (which may be serial, suspended or busy) goes to it at once and
/// never holds a slot, so it cannot stall anyone else; so does the dependent that continues on a
/// lane (see `QueuePool`). A slot is held only from hand-over to `start()`, never while a command
/// runs, so the bound never limits how many commands execute at once (an asynchronous command that
/// waits for the network holds no slot). A command cancelled in the backlog still goes through its
/// queue, which ends it (as Foundation's queue would). Suspending a command's own queue (read from
/// ``Command/executeQueue`` after it was handed over) keeps its slot until you resume it.
enum Admission {
    /// Slots per quality of service.
    static let limit = max(64, 16 * ProcessInfo.processInfo.activeProcessorCount)

    /// One quality of service: slots taken and the commands waiting, first in first out (one list
    /// read from `head`: a million waiting commands are one buffer, never copied reversed).
    private struct Class {
        var inFlight = 0
        /// 8 bytes a waiting command (a class reference, not a protocol existential).
        var waiting: [CommandNode?] = []
        /// The next to hand over; `waiting` before it holds only handed-over places (nil).
        var head = 0

        /// Takes a slot (true), or queues `candidate` (false).
        mutating func admit(_ candidate: CommandNode) -> Bool {
            if inFlight < limit {
                inFlight += 1
                return true
            }
            waiting.append(candidate)
            return false
        }

        mutating func popFirst() -> CommandNode? {
            guard head < waiting.count else { return nil }
            var next: CommandNode? = nil
            swap(&next, &waiting[head])
            head += 1
            if head == waiting.count {
                // Drained: a million-wide fan-out's buffer is given back.
                waiting = []
                head = 0
            } else if head >= 4_096 && head * 2 >= waiting.count {
                // Mostly handed over: drop the front (amortised O(1) a command).
                waiting.removeFirst(head)
                head = 0
            }
            return next
        }

        var count: Int { waiting.count - head }
    }

    // Guards every class (one small critical section per admission and per start).
    private static let classes = Locked<[Int: Class]>([:])

    /// Takes a slot of `slot` (a quality of service's raw value) for `candidate`: true if the
    /// caller hands it over now; false if it waits and ``started(slot:)`` hands it over later.
    static func admit(_ candidate: CommandNode, slot: Int) -> Bool {
        classes.withLock { $0[slot, default: Class()].admit(candidate) }
    }

    /// A command admitted with `slot` started: frees its slot, which the oldest waiting command of
    /// that class takes (handed over here, outside the lock).
    /// A loop, not a recursion: a backlog of a million cancelled commands passes the slot on without
    /// growing the stack.
    static func started(slot: Int) {
        while let next = classes.withLock({ classes -> CommandNode? in
            if let next = classes[slot]?.popFirst() { return next }
            classes[slot, default: Class()].inFlight -= 1
            return nil
        }) {
            if next.handOverAdmitted(slot: slot) { return }
        }
    }

    /// Commands waiting for a slot of `slot` and slots taken (for tests).
    static func snapshot(slot: Int) -> (waiting: Int, inFlight: Int) {
        classes.withLock { classes in
            guard let entry = classes[slot] else { return (0, 0) }
            return (entry.count, entry.inFlight)
        }
    }
}

extension Command {
    /// ``CommandNode/handOverAdmitted(slot:)``.
    func handOverAfterAdmission(slot: Int) -> Bool {
        let queue = withQueueMaker(lane: false) { makeQueue in
            machine.withLock { $0.handOverAdmitted(slot: slot, makeQueue: makeQueue) }
        }
        if addToQueue(queue) { return true }
        // Ended meanwhile: it will not start, so it does not keep the slot.
        machine.withLock { _ = $0.takeAdmission() }
        return false
    }
}
