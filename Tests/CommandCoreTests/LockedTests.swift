import Dispatch
import Testing

@testable import CommandCore

/// `Locked`, plain and contended (the adaptive kind on glibc): each keeps its value whole when four
/// threads take it 25,000 times each at once.
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
}
