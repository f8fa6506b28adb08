import CommandTestSupport
import Foundation
import Testing

@testable import CommandCore

@Suite struct CancelableTests {
    @Test func blockCancelable_runsItsBlockOnce() {
        let runs = Atomic(0)
        let cancelable = BlockCancelable { runs.add(1, ordering: .relaxed) }
        #expect(!cancelable.isCancelled)
        DispatchQueue.concurrentPerform(iterations: 16) { _ in cancelable.cancel() }
        #expect(runs.load(ordering: .relaxed) == 1)
        #expect(cancelable.isCancelled)
    }

    @Test func compound_cancelsMembers_andCancelsLateAdditionsAtOnce() {
        let runs = Atomic(0)
        let compound = CompoundCancelable()
        let a = BlockCancelable { runs.add(1, ordering: .relaxed) }
        let b = BlockCancelable { runs.add(10, ordering: .relaxed) }
        compound.add(a)
        compound.add(b)
        compound.remove(b)
        #expect(compound.count == 1)
        compound.cancel()
        #expect(runs.load(ordering: .relaxed) == 1)
        #expect(!b.isCancelled)
        let late = BlockCancelable { runs.add(100, ordering: .relaxed) }
        compound.add(late)
        #expect(late.isCancelled)
        #expect(runs.load(ordering: .relaxed) == 101)
    }

    @Test func cancelBag_cancelsWhatItHoldsWhenReleased() {
        let runs = Atomic(0)
        var bag: CancelBag? = CancelBag()
        BlockCancelable { runs.add(1, ordering: .relaxed) }.store(in: bag!)
        BlockCancelable { runs.add(1, ordering: .relaxed) }.store(in: bag!)
        #expect(bag?.count == 2)
        #expect(runs.load(ordering: .relaxed) == 0)
        bag = nil
        #expect(runs.load(ordering: .relaxed) == 2)
    }
}
