import CommandCore
import CommandTestSupport
import Dispatch
import Foundation
import Testing

@Suite struct CommandSubjectTests {

    @Test func subject_keepsEarlySends_andReplaysPerPolicy() async {
        let all = CommandSubject<Int>(replay: .all)
        let latest = CommandSubject<Int>(replay: .latest)
        for value in 1...3 {
            all.send(value)
            latest.send(value)
        }
        all.complete()
        latest.complete()
        let allValues = Locked<[Int]>([])
        let latestValues = Locked<[Int]>([])
        let done = Checkpoint(count: 2)
        all.execute(on: .immediate) { event in
            if case .value(let value) = event { allValues.withLock { $0.append(value) } } else { done.fulfill() }
        }
        latest.execute(on: .immediate) { event in
            if case .value(let value) = event { latestValues.withLock { $0.append(value) } } else { done.fulfill() }
        }
        #expect(await done.wait())
        #expect(allValues.withLock { $0 } == [1, 2, 3])
        #expect(latestValues.withLock { $0 } == [3])
    }
}
