import CommandCore
import Dispatch
import Foundation
import XCTest

// Foundation's own `OperationQueue` tests (swift-corelibs-foundation, Tests/Foundation/
// TestOperationQueue.swift), ported: each case runs three times, with the operations made as plain
// `BlockOperation`s (the control), as commands that end inside `run`, and as commands that end later
// from another thread. The assertions are upstream's. What changed, and why:
// - Work that upstream simulates with `Thread.sleep` inside an operation waits on a `OpenGate` the test
//   opens instead (a command waits without blocking a thread; the control blocks its own thread, as
//   upstream's did), so no case depends on timing.
// - Upstream's sleeps that wait for something (a queue to be released, a queue to drop a finished
//   operation) wait for the event itself.
// - Foundation runs an operation whose dependency was cancelled; a command's default policy
//   (`cancelIfAnyFails`) does not. Cases that rely on Foundation's rule give the commands
//   `dependencyPolicy = .runRegardless`, which is that rule.
// Cases that cannot apply to a command say why at the top of the case.

/// How a case makes its operations.
enum Flavor: String, CaseIterable {
    /// `BlockOperation`: Foundation's own, the control.
    case plain
    /// A command that ends inside `run`.
    case commandNow
    /// A command that ends later, from another thread.
    case commandLater

    /// An operation that runs `body` (on the queue that starts it) and then ends.
    func operation(_ body: @escaping @Sendable () -> Void) -> Operation {
        switch self {
        case .plain:
            return BlockOperation(block: body)
        case .commandNow:
            return Command<Void> { result in
                body()
                result.succeed()
                return nil
            }
        case .commandLater:
            return Command<Void> { result in
                body()
                DispatchQueue.global().async { result.succeed() }
                return nil
            }
        }
    }

    /// An operation that runs `body`, then stays running until `gate` opens (upstream's sleep).
    func operation(until gate: OpenGate, _ body: @escaping @Sendable () -> Void = {}) -> Operation {
        switch self {
        case .plain:
            return BlockOperation {
                body()
                gate.block()
            }
        case .commandNow, .commandLater:
            return Command<Void> { result in
                body()
                gate.whenOpen { result.succeed() }
                return nil
            }
        }
    }

    /// Foundation's rule for a cancelled dependency (run anyway), for commands.
    func runRegardless(_ operations: Operation...) {
        for case let command as Command<Void> in operations { command.dependencyPolicy = .runRegardless }
    }
}

/// Opened once by the test; what waits for it either blocks its own thread (the control) or is called
/// back.
final class OpenGate: Sendable {
    private let state = Locked<(open: Bool, waiting: [@Sendable () -> Void])>((false, []))
    private let semaphore = DispatchSemaphore(value: 0)

    func open() {
        let waiting = state.withLock { state -> [@Sendable () -> Void] in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        semaphore.signal()
        for callback in waiting { callback() }
    }

    func whenOpen(_ callback: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.open { return true }
            state.waiting.append(callback)
            return false
        }
        if now { callback() }
    }

    /// Blocks the calling thread until open (only the plain control does this, as upstream's did).
    func block() {
        semaphore.wait()
        semaphore.signal()
    }
}

/// An `OperationQueue` that reports its release (upstream checked a weak reference after a sleep).
final class ReleaseReportingQueue: OperationQueue, @unchecked Sendable {
    // Set before the queue is shared, read in deinit only.
    nonisolated(unsafe) var onRelease: (() -> Void)?
    deinit { onRelease?() }
}

final class OperationQueueContractTests: XCTestCase {

    func test_OperationCount() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            let gate1 = OpenGate()
            let op1 = flavor.operation(until: gate1)
            queue.addOperation(op1)
            XCTAssertEqual(queue.operationCount, 1, "\(flavor)")
            gate1.open()
            queue.waitUntilAllOperationsAreFinished()
            XCTAssertEqual(queue.operationCount, 0, "\(flavor)")

            let gate2 = OpenGate()
            let op2 = flavor.operation(until: gate2)
            let op3 = flavor.operation(until: gate2)
            queue.addOperation(op2)
            queue.addOperation(op3)
            XCTAssertEqual(queue.operationCount, 2, "\(flavor)")
            let operations = queue.operations
            XCTAssertEqual(operations.count, 2, "\(flavor)")
            if operations.count == 2 {
                XCTAssertEqual(operations[0], op2, "\(flavor)")
                XCTAssertEqual(operations[1], op3, "\(flavor)")
            }
            gate2.open()
            queue.waitUntilAllOperationsAreFinished()
            XCTAssertEqual(queue.operationCount, 0, "\(flavor)")
            XCTAssertEqual(queue.operations.count, 0, "\(flavor)")
        }
    }

    func test_OperationPriorities() {
        for flavor in Flavor.allCases {
            let messages = Locked([String]())
            let operation1 = flavor.operation { messages.withLock { $0.append("Operation1 executed") } }
            let operation2 = flavor.operation { messages.withLock { $0.append("Operation2 executed") } }
            let operation3 = flavor.operation { messages.withLock { $0.append("Operation3 executed") } }
            let operation4 = flavor.operation { messages.withLock { $0.append("Operation4 executed") } }
            operation4.queuePriority = .veryLow
            operation3.queuePriority = .veryHigh
            operation2.queuePriority = .low
            operation1.queuePriority = .normal
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            queue.addOperations([operation1, operation2, operation3, operation4], waitUntilFinished: true)
            messages.withLock {
                XCTAssertEqual(
                    $0, ["Operation3 executed", "Operation1 executed", "Operation2 executed", "Operation4 executed"],
                    "\(flavor)")
            }
        }
    }

    func test_isExecutingWorks() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            let box = Locked<Operation?>(nil)
            let sawExecuting = Locked<Bool?>(nil)
            let op = flavor.operation {
                let operation = box.withLock { $0 }
                sawExecuting.withLock { $0 = operation?.isExecuting }
            }
            box.withLock { $0 = op }
            XCTAssertFalse(op.isExecuting, "\(flavor)")
            queue.addOperation(op)
            queue.waitUntilAllOperationsAreFinished()
            XCTAssertEqual(true, sawExecuting.withLock { $0 }, "\(flavor)")
            XCTAssertFalse(op.isExecuting, "\(flavor)")
            box.withLock { $0 = nil }
        }
    }

    /// Upstream's custom asynchronous operation is replaced by a command ending later (what a command
    /// is); the plain control keeps upstream's `AsyncOperation` shape through a `BlockOperation` started
    /// by hand, which is synchronous, so the control is the command-now case's.
    func test_AsyncOperation() {
        for flavor in [Flavor.commandNow, .commandLater] {
            let gate = OpenGate()
            let operation = flavor.operation(until: gate)
            XCTAssertFalse(operation.isExecuting, "\(flavor)")
            XCTAssertFalse(operation.isFinished, "\(flavor)")
            let finished = expectation(description: "finished")
            operation.completionBlock = { finished.fulfill() }
            operation.start()
            XCTAssertTrue(operation.isExecuting, "\(flavor)")
            gate.open()
            wait(for: [finished], timeout: 30)
            XCTAssertFalse(operation.isExecuting, "\(flavor)")
            XCTAssertTrue(operation.isFinished, "\(flavor)")
        }
    }

    /// Not for a command ending later: an asynchronous operation is, by definition, not finished when
    /// `start()` returns.
    func test_SyncOperationWithoutAQueue() {
        for flavor in [Flavor.plain, .commandNow] {
            let hasRun = Locked(false)
            let operation = flavor.operation { hasRun.withLock { $0 = true } }
            XCTAssertFalse(operation.isExecuting, "\(flavor)")
            XCTAssertFalse(operation.isFinished, "\(flavor)")
            operation.start()
            XCTAssertFalse(operation.isExecuting, "\(flavor)")
            XCTAssertTrue(operation.isFinished, "\(flavor)")
            XCTAssertTrue(hasRun.withLock { $0 }, "\(flavor)")
        }
    }

    func test_CancelOneOperation() {
        for flavor in Flavor.allCases {
            let values = Locked([Int]())
            let gates = (0..<5).map { _ in OpenGate() }
            var operations = (0..<5).map { i in flavor.operation(until: gates[i]) { values.withLock { $0.append(i) } } }
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            queue.addOperations(operations, waitUntilFinished: false)
            operations.remove(at: 2).cancel()
            for gate in gates { gate.open() }
            queue.waitUntilAllOperationsAreFinished()
            XCTAssertTrue(!values.withLock { $0.contains(2) }, "\(flavor)")
        }
    }

    func test_CancelOperationsOfSpecificQueuePriority() {
        for flavor in Flavor.allCases {
            let values = Locked([Int]())
            let gate = OpenGate()
            let operation1 = flavor.operation(until: gate) { values.withLock { $0.append(0) } }
            operation1.queuePriority = .high
            let operation2 = flavor.operation(until: gate) { values.withLock { $0.append(1) } }
            operation2.queuePriority = .high
            let rest = (2..<5).map { i in flavor.operation { values.withLock { $0.append(i) } } }
            for operation in rest { operation.queuePriority = .normal }
            let operations = [operation1, operation2] + rest
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            queue.addOperations(operations, waitUntilFinished: false)
            for operation in operations where operation.queuePriority == .normal {
                operation.cancel()
            }
            gate.open()
            queue.waitUntilAllOperationsAreFinished()
            values.withLock {
                XCTAssertTrue($0.count == 2, "\(flavor) \($0)")
                XCTAssertTrue($0.first == 0, "\(flavor)")
                XCTAssertTrue($0.last == 1, "\(flavor)")
            }
        }
    }

    /// Adds one `flavor` operation to `queue`, waits until it ran, and returns the
    /// `OperationQueue.current` it saw (then runs `after` inside it).
    private func currentQueue(
        seenBy flavor: Flavor, on queue: OperationQueue, after: @escaping @Sendable () -> Void = {}
    ) -> OperationQueue? {
        let ran = expectation(description: "Background execution \(flavor)")
        let seen = Locked<OperationQueue?>(nil)
        queue.addOperation(
            flavor.operation {
                seen.withLock { $0 = OperationQueue.current }
                ran.fulfill()
                after()
            })
        wait(for: [ran], timeout: 30)
        return seen.withLock { $0 }
    }

    func test_CurrentQueueOnBackgroundQueue() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            XCTAssertEqual(queue, currentQueue(seenBy: flavor, on: queue), "\(flavor)")
        }
    }

    func test_CurrentQueueOnBackgroundQueueWithSelfCancel() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            // Cancelling operation X from inside operation X must not crash.
            let seen = currentQueue(seenBy: flavor, on: queue) { OperationQueue.current?.cancelAllOperations() }
            XCTAssertEqual(queue, seen, "\(flavor)")
            queue.waitUntilAllOperationsAreFinished()
        }
    }

    func test_CurrentQueueWithCustomUnderlyingQueue() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            let underlying = DispatchQueue(label: "underlying_queue")
            queue.underlyingQueue = underlying
            XCTAssertEqual(queue, currentQueue(seenBy: flavor, on: queue), "\(flavor)")
            queue.waitUntilAllOperationsAreFinished()
            withExtendedLifetime(underlying) {}
        }
    }

    func test_isSuspended() {
        for flavor in Flavor.allCases {
            let resumed = expectation(description: "DispatchQueue execution \(flavor)")
            let ran = expectation(description: "OperationQueue execution \(flavor)")
            let dispatchQueue = DispatchQueue(label: "underlying_queue")
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            queue.underlyingQueue = dispatchQueue
            queue.isSuspended = true
            let onUnderlying = Locked(false)
            queue.addOperation(
                flavor.operation {
                    onUnderlying.withLock { $0 = OperationQueue.current?.underlyingQueue === dispatchQueue }
                    ran.fulfill()
                })
            dispatchQueue.async {
                queue.isSuspended = false
                resumed.fulfill()
            }
            wait(for: [resumed, ran], timeout: 30)
            XCTAssert(onUnderlying.withLock { $0 }, "\(flavor)")
            queue.waitUntilAllOperationsAreFinished()
        }
    }

    func test_CurrentQueueWithUnderlyingQueueResetToNil() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            let underlying = DispatchQueue(label: "underlying_queue")
            queue.underlyingQueue = underlying
            queue.underlyingQueue = nil
            XCTAssertEqual(queue, currentQueue(seenBy: flavor, on: queue), "\(flavor)")
        }
    }

    func test_OperationDependencyCount() {
        for flavor in Flavor.allCases {
            let op1 = flavor.operation {}
            op1.name = "op1"
            let op2 = flavor.operation {}
            op2.name = "op2"
            op1.addDependency(op2)
            XCTAssert(op1.dependencies.count == 1, "\(flavor)")
        }
    }

    func test_CancelDependency() {
        for flavor in Flavor.allCases {
            let finished = expectation(description: "Operation should finish \(flavor)")
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            let ranCancelled = Locked(false)
            let op1 = flavor.operation { ranCancelled.withLock { $0 = true } }
            let op2 = flavor.operation { finished.fulfill() }
            flavor.runRegardless(op2)
            op2.addDependency(op1)
            op1.cancel()
            queue.addOperation(op1)
            queue.addOperation(op2)
            wait(for: [finished], timeout: 30)
            XCTAssertFalse(ranCancelled.withLock { $0 }, "\(flavor): Should not run")
        }
    }

    func test_Deadlock() {
        for flavor in Flavor.allCases {
            let ran1 = expectation(description: "Operation should finish \(flavor)")
            let ran2 = expectation(description: "Operation should finish \(flavor)")
            let op1 = flavor.operation { ran1.fulfill() }
            op1.name = "op1"
            let op2 = flavor.operation { ran2.fulfill() }
            op2.name = "op2"
            op1.addDependency(op2)
            // Narrow scope to force early release of the queue object.
            _ = {
                let queue = OperationQueue()
                queue.maxConcurrentOperationCount = 1
                queue.addOperation(op1)
                queue.addOperation(op2)
            }()
            wait(for: [ran1, ran2], timeout: 30)
        }
    }

    func test_CancelOutOfQueue() {
        for flavor in Flavor.allCases {
            let op = flavor.operation {}
            op.cancel()
            XCTAssert(op.isCancelled, "\(flavor)")
            XCTAssertFalse(op.isExecuting, "\(flavor)")
            XCTAssertFalse(op.isFinished, "\(flavor)")
        }
    }

    func test_CrossQueueDependency() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            let queue2 = OperationQueue()
            let ran1 = expectation(description: "Operation should finish \(flavor)")
            let ran2 = expectation(description: "Operation should finish \(flavor)")
            let op1 = flavor.operation { ran1.fulfill() }
            op1.name = "op1"
            let op2 = flavor.operation { ran2.fulfill() }
            op2.name = "op2"
            op1.addDependency(op2)
            queue.addOperation(op1)
            queue2.addOperation(op2)
            wait(for: [ran1, ran2], timeout: 30)
        }
    }

    func test_CancelWhileSuspended() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            queue.isSuspended = true
            let op1 = flavor.operation {}
            op1.name = "op1"
            let op2 = flavor.operation {}
            op2.name = "op2"
            queue.addOperation(op1)
            queue.addOperation(op2)
            op1.cancel()
            op2.cancel()
            queue.isSuspended = false
            queue.waitUntilAllOperationsAreFinished()
            for op in [op1, op2] {
                XCTAssert(op.isCancelled, "\(flavor)")
                XCTAssertFalse(op.isExecuting, "\(flavor)")
                XCTAssert(op.isFinished, "\(flavor)")
            }
        }
    }

    func test_OperationOrder() {
        for flavor in Flavor.allCases {
            XCTAssertEqual(
                runInOrder(flavor, priorities: Array(repeating: .normal, count: 5)), [1, 2, 3, 4, 5], "\(flavor)")
        }
    }

    func test_OperationOrder2() {
        for flavor in Flavor.allCases {
            let order = runInOrder(flavor, priorities: [.veryLow, .low, .normal, .high, .veryHigh])
            XCTAssertEqual(order, [5, 4, 3, 2, 1], "\(flavor)")
        }
    }

    /// Five operations on a suspended serial queue with these priorities; the order they ran in.
    private func runInOrder(_ flavor: Flavor, priorities: [Operation.QueuePriority]) -> [Int] {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let array = Locked([Int]())
        for (index, priority) in priorities.enumerated() {
            let op = flavor.operation { array.withLock { $0.append(index + 1) } }
            op.queuePriority = priority
            op.name = "op\(index + 1)"
            queue.addOperation(op)
        }
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        return array.withLock { $0 }
    }

    func test_ExecutionOrder() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            let didRunOp1 = expectation(description: "Did run first operation \(flavor)")
            let didRunOp1Dependency = expectation(description: "Did run first operation dependency \(flavor)")
            let didRunOp2 = expectation(description: "Did run second operation \(flavor)")
            let dependencyFirst = Locked(false)
            let sawDependencyFirst = Locked(false)
            let op1 = flavor.operation {
                sawDependencyFirst.withLock { $0 = dependencyFirst.withLock { $0 } }
                didRunOp1.fulfill()
            }
            let op1Dependency = flavor.operation {
                dependencyFirst.withLock { $0 = true }
                didRunOp1Dependency.fulfill()
            }
            op1.addDependency(op1Dependency)
            queue.addOperations([op1, op1Dependency], waitUntilFinished: false)
            queue.addOperation(flavor.operation { didRunOp2.fulfill() })
            wait(for: [didRunOp1, didRunOp1Dependency, didRunOp2], timeout: 30)
            XCTAssertTrue(sawDependencyFirst.withLock { $0 }, "\(flavor): Dependency should be executed first")
        }
    }

    func test_WaitUntilFinished() {
        for flavor in Flavor.allCases {
            let queue1 = OperationQueue()
            let queue2 = OperationQueue()
            let gate = OpenGate()
            let op1 = flavor.operation(until: gate)
            let op2 = flavor.operation {}
            op2.addDependency(op1)
            queue1.addOperation(op1)
            queue2.addOperation(op2)
            gate.open()
            queue2.waitUntilAllOperationsAreFinished()
            XCTAssertEqual(queue2.operationCount, 0, "\(flavor)")
        }
    }

    /// Upstream sleeps 0.1 s after `waitUntilFinished` because the queue drops a finished operation
    /// a moment after it turns finished; this waits for the queue instead.
    func test_OperationWaitUntilFinished() {
        for flavor in Flavor.allCases {
            let queue1 = OperationQueue()
            let gate = OpenGate()
            let op1 = flavor.operation(until: gate)
            queue1.addOperation(op1)
            gate.open()
            op1.waitUntilFinished()
            XCTAssertTrue(op1.isFinished, "\(flavor)")
            queue1.waitUntilAllOperationsAreFinished()
            XCTAssertEqual(queue1.operationCount, 0, "\(flavor)")
        }
    }

    // test_CustomOperationReady is skipped upstream (SR-14657) and overrides `isReady` by hand: a
    // command's readiness is its dependencies (`isReady` is final), so it has no command form.

    func test_DependencyCycleBreak() {
        for flavor in Flavor.allCases {
            let op1DidRun = expectation(description: "op1 supposed to be run \(flavor)")
            let op2DidRun = expectation(description: "op2 supposed to be run \(flavor)")
            let op2Finished = expectation(description: "op2 supposed to be finished \(flavor)")
            let op3Cancelled = expectation(description: "op3 supposed to be cancelled \(flavor)")
            let op3DidRun = expectation(description: "op3 is not supposed to be run \(flavor)")
            op3DidRun.isInverted = true
            let ops = Locked<[Operation]>([])
            let op1 = flavor.operation {
                op1DidRun.fulfill()
                if ops.withLock({ $0[1] }).isFinished { op2Finished.fulfill() }
            }
            let op2 = flavor.operation {
                op2DidRun.fulfill()
                if ops.withLock({ $0[2] }).isCancelled { op3Cancelled.fulfill() }
            }
            let op3 = flavor.operation { op3DidRun.fulfill() }
            flavor.runRegardless(op1, op2, op3)
            ops.withLock { $0 = [op1, op2, op3] }
            // Create a dependency cycle.
            op1.addDependency(op2)
            op2.addDependency(op3)
            op3.addDependency(op1)
            let queue1 = OperationQueue()
            queue1.addOperation(op1)
            queue1.addOperation(op2)
            queue1.addOperation(op3)
            XCTAssertEqual(queue1.operationCount, 3, "\(flavor)")
            // Break the cycle.
            op3.cancel()
            wait(for: [op1DidRun, op2DidRun, op2Finished, op3Cancelled], timeout: 30)
            queue1.waitUntilAllOperationsAreFinished()
            // Every operation has finished: op3 can no longer run, so a short wait proves it did not.
            wait(for: [op3DidRun], timeout: 0.01)
            ops.withLock { $0 = [] }
        }
    }

    /// Upstream sleeps a second and checks a weak reference to the queue; this waits for the queue's
    /// release itself.
    func test_Lifecycle() {
        for flavor in Flavor.allCases {
            let opStarted = expectation(description: "Operation supposed to start \(flavor)")
            let opDone = expectation(description: "Operation supposed to be done \(flavor)")
            let queueReleased = expectation(description: "Queue should be deallocated \(flavor)")
            let gate1 = OpenGate()
            let gate2 = OpenGate()
            let op1 = flavor.operation(until: gate1)
            let op2 = flavor.operation(until: gate2) { opStarted.fulfill() }
            op2.completionBlock = { opDone.fulfill() }
            flavor.runRegardless(op1)
            op1.addDependency(op2)
            weak var weakQueue: OperationQueue?
            _ = {
                let queue = ReleaseReportingQueue()
                queue.onRelease = { queueReleased.fulfill() }
                weakQueue = queue
                queue.addOperation(op1)
                queue.addOperation(op2)
            }()
            wait(for: [opStarted], timeout: 30)
            op2.cancel()
            gate2.open()
            wait(for: [opDone], timeout: 30)
            gate1.open()
            wait(for: [queueReleased], timeout: 30)
            XCTAssertNil(weakQueue, "\(flavor): Queue should be deallocated at this point")
        }
    }

    /// Upstream's first operation blocks on an expectation the second fulfils; here it ends when the
    /// second ran (a command does not block), which proves the same: both run at once on width 2.
    func test_ConcurrentOperations() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 2
            for _ in 0..<3 {
                let didRunOp1 = expectation(description: "Did run first operation \(flavor)")
                let didRunOp2 = expectation(description: "Did run second operation \(flavor)")
                let op2Ran = OpenGate()
                queue.addOperation(flavor.operation(until: op2Ran) { didRunOp1.fulfill() })
                queue.addOperation(
                    flavor.operation {
                        didRunOp2.fulfill()
                        op2Ran.open()
                    })
                wait(for: [didRunOp1, didRunOp2], timeout: 30)
            }
            queue.waitUntilAllOperationsAreFinished()
        }
    }

    func test_ConcurrentOperationsWithDependenciesAndCompletions() {
        for flavor in Flavor.allCases {
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 2
            for _ in 0..<3 {
                let didRunOp1 = expectation(description: "Did run first operation \(flavor)")
                let didRunOp1Completion = expectation(description: "Did run first operation completion \(flavor)")
                let didRunOp1Dependency = expectation(description: "Did run first operation dependency \(flavor)")
                let didRunOp2 = expectation(description: "Did run second operation \(flavor)")
                let othersRan = OpenGate()
                let count = Locked(0)
                let arrived: @Sendable () -> Void = {
                    if count.withLock({
                        $0 += 1; return $0
                    }) == 2 {
                        othersRan.open()
                    }
                }
                let op1 = flavor.operation(until: othersRan) { didRunOp1.fulfill() }
                op1.completionBlock = { didRunOp1Completion.fulfill() }
                let op1Dependency = flavor.operation {
                    didRunOp1Dependency.fulfill()
                    arrived()
                }
                queue.addOperations([op1, op1Dependency], waitUntilFinished: false)
                queue.addOperation(
                    flavor.operation {
                        didRunOp2.fulfill()
                        arrived()
                    })
                wait(for: [didRunOp1, didRunOp1Completion, didRunOp1Dependency, didRunOp2], timeout: 30)
            }
        }
    }

    // test_BlockOperationAddExecutionBlock tests `BlockOperation.addExecutionBlock`: no command form.
    // test_MainQueueGetter and test_CurrentQueueOnMainQueue involve no operation.
}
