import Dispatch
import Testing

@testable import CommandCore

/// `Locked`, plain and contended (on Linux a futex lock, the contended kind spinning before it
/// sleeps): each keeps its value whole when threads take it at once, and never lets two in.
@Suite struct LockedTests {
    @Test(arguments: [false, true])
    func fourThreadsAtOnce_loseNoIncrement(contended: Bool) {
        let counter = contended ? Locked(contended: 0) : Locked(0)
        // Four threads of the Dispatch pool, for a few milliseconds of work: nothing waits on an event.
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<25_000 { counter.withLock { $0 += 1 } }
        }
        #expect(counter.withLock { $0 } == 100_000)
    }

    /// Eight threads on two cores, each holding the lock across a loop long enough to be preempted
    /// inside it: the others find it held and sleep on it (the futex path), and are woken. No two are
    /// ever inside at once, and no increment is lost.
    @Test(arguments: [false, true])
    func eightThreadsHoldingItLong_sleepAndWake_neverTwoInside(contended: Bool) {
        struct Counts {
            var total = 0
            var inside = 0
            var mostInside = 0
            var work = 0
        }
        let counts = contended ? Locked(contended: Counts()) : Locked(Counts())
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<2_000 {
                counts.withLock { counts in
                    counts.inside += 1
                    counts.mostInside = max(counts.mostInside, counts.inside)
                    for step in 0..<200 { counts.work &+= step }
                    counts.total += 1
                    counts.inside -= 1
                }
            }
        }
        let final = counts.withLock { $0 }
        #expect(final.total == 16_000)
        #expect(final.mostInside == 1 && final.inside == 0)
    }

    /// `OwnedLocked`, a command's state and lock with no object header: the same exclusion as
    /// `Locked` under eight threads, its claim word beside the lock, and `destroy()` releasing the
    /// value (an object held in it is deinitialised then, not before).
    @Test func ownedLocked_excludes_keepsItsClaimWord_andDestroyReleasesTheValue() {
        final class Tracked: @unchecked Sendable {
            // Written once, before the threads start, and read after they ended.
            var count = 0
        }
        weak var released: Tracked?
        do {
            let tracked = Tracked()
            released = tracked
            let lock = OwnedLocked((tracked, inside: 0, mostInside: 0))
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                for _ in 0..<2_000 {
                    lock.withLock { value in
                        value.inside += 1
                        value.mostInside = max(value.mostInside, value.inside)
                        value.0.count += 1
                        value.inside -= 1
                    }
                }
            }
            #expect(lock.withLock { $0.0.count } == 16_000)
            #expect(lock.withLock { $0.mostInside } == 1)
            #expect(lock.claimWord.isFree)
            lock.claimWord.claim()
            #expect(lock.claimWord.isClaimed && lock.claimWord.release())
            #expect(lock.claimWord.isFree)
            #expect(released != nil, "held by the lock's value until destroy()")
            lock.destroy()
        }
        #expect(released == nil, "destroy() deinitialised the value")
    }
}
