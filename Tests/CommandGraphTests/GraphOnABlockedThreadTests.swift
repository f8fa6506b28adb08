import CommandGraph
import Dispatch
import Foundation
import XCTest

/// The first code a command-line tool or a test writes: a graph run on the main thread, without an
/// event handler, then the main thread blocked on a semaphore until `whenFinished`. XCTest runs its
/// cases on the main thread, and nothing drains the main queue while the semaphore waits: the graph's
/// completion must not go through the caller's context.
final class GraphOnABlockedThreadTests: XCTestCase {
    private func command(_ value: Int) -> Command<Int> {
        Command<Int> { result in
            DispatchQueue.global().async { result.succeed(value) }
            return nil
        }
    }

    func testWhenFinished_onTheMainThread_withASemaphore_ends() throws {
        XCTAssertTrue(Thread.isMainThread)
        let a = command(1)
        let b = command(2)
        // The code, as written.
        let graph = Graph()
        try graph.add(a); try graph.add(b, dependsOn: [a])
        try graph.run()  // on the main thread, no handler
        let done = DispatchSemaphore(value: 0)
        let outcome = OutcomeBox()
        graph.whenFinished { result in
            outcome.set(result)
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "whenFinished waited for the blocked main queue")
        XCTAssertEqual(outcome.get()?.completed.count, 2)
    }

    func testGroup_onTheMainThread_withASemaphore_ends() {
        XCTAssertTrue(Thread.isMainThread)
        let group = GroupCommand(name: "group", children: [command(1), command(2)])
        let done = DispatchSemaphore(value: 0)
        group.observeState(on: .immediate) { state in if state.isTerminal { done.signal() } }
        group.start()
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertTrue(group.isFinished)
    }
}

private final class OutcomeBox: @unchecked Sendable {
    // Guarded by `lock`.
    private var value: Graph.Outcome?
    private let lock = NSLock()
    func set(_ outcome: Graph.Outcome) { lock.withLock { value = outcome } }
    func get() -> Graph.Outcome? { lock.withLock { value } }
}
