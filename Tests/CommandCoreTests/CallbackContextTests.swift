import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

/// Where callbacks run: the context captured when `execute` was called, or the one named.
@Suite struct CallbackContextTests {
    @Test func registeredDispatchQueue_isCaptured_andCallbacksRunOnIt() async {
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "caller")
        queue.setSpecific(key: key, value: "caller")
        CallbackContext.register(queue)
        let onCaller = Mutex<[Bool]>([])
        let done = Checkpoint()
        queue.async {
            Add(1, 2).execute { event in
                onCaller.withLock { $0.append(DispatchQueue.getSpecific(key: key) == "caller") }
                if event.isTerminal { done.fulfill() }
            }
        }
        #expect(await done.wait())
        #expect(onCaller.withLock { $0 } == [true, true])
    }

    @Test func explicitQueue_receivesEveryCallback() async {
        let key = DispatchSpecificKey<Int>()
        let queue = DispatchQueue(label: "explicit", attributes: .concurrent)
        queue.setSpecific(key: key, value: 7)
        let onQueue = Mutex<[Bool]>([])
        let recorder = Recorder<Int>()
        let command = Command<Int> { result in
            for value in 0..<100 { result.send(value) }
            result.complete()
            return nil
        }
        command.execute(on: .queue(queue)) { event in
            onQueue.withLock { $0.append(DispatchQueue.getSpecific(key: key) == 7) }
            recorder.record(event)
        }
        #expect(await recorder.waitForTerminal())
        #expect(onQueue.withLock { $0 }.count == 101)
        #expect(onQueue.withLock { $0 }.allSatisfy { $0 })
        #expect(recorder.values == Array(0..<100))  // in order, even on a concurrent queue
        #expect(recorder.overlapCount == 0)
    }

    @Test func mainQueue_isCapturedFromTheMainActor() async {
        let onMain = Mutex<[Bool]>([])
        let done = Checkpoint()
        await MainActor.run {
            _ = Add(3, 4).execute { event in
                onMain.withLock { $0.append(CallbackContext.isMainQueue) }
                if event.isTerminal { done.fulfill() }
            }
        }
        #expect(await done.wait())
        #expect(onMain.withLock { $0 } == [true, true])
    }

    @Test func operationQueue_isCapturedInsideAnOperation() async {
        let queue = OperationQueue()
        queue.name = "caller-operation-queue"
        let names = Mutex<[String?]>([])
        let done = Checkpoint()
        queue.addOperation {
            Add(5, 6).execute { event in
                names.withLock { $0.append(OperationQueue.current?.name) }
                if event.isTerminal { done.fulfill() }
            }
        }
        #expect(await done.wait())
        #expect(names.withLock { $0 } == ["caller-operation-queue", "caller-operation-queue"])
    }

    @Test func runLoop_isCapturedOnAThreadRunningIt_andWokenForDelivery() async {
        let thread = RunLoopThread()
        thread.start()
        #expect(await thread.ready.wait())
        guard let loop = thread.loop else { Issue.record("no run loop"); return }
        let onThread = Mutex<[Bool]>([])
        let done = Checkpoint()
        // Execute from inside the loop, as a UI thread would.
        CallbackContextProbe.schedule(on: loop) {
            Add(7, 8).execute { event in
                onThread.withLock { $0.append(thread.isCurrent) }
                if event.isTerminal { done.fulfill() }
            }
        }
        #expect(await done.wait())
        #expect(onThread.withLock { $0 } == [true, true])
        // An explicit run-loop context from elsewhere also delivers there.
        let explicit = Mutex<[Bool]>([])
        let done2 = Checkpoint()
        Add(1, 1).execute(on: .runLoop(loop)) { event in
            explicit.withLock { $0.append(thread.isCurrent) }
            if event.isTerminal { done2.fulfill() }
        }
        #expect(await done2.wait())
        #expect(explicit.withLock { $0 } == [true, true])
        thread.stop()
    }

    @Test func immediate_runsOnTheProducingThread_inOrder() async {
        let producer = Mutex<ObjectIdentifier?>(nil)
        let sameThread = Mutex<[Bool]>([])
        let recorder = Recorder<Int>()
        let command = Command<Int> { result in
            producer.withLock { $0 = ObjectIdentifier(Thread.current) }
            result.send(1)
            result.send(2)
            result.complete()
            return nil
        }
        command.execute(on: .immediate) { event in
            sameThread.withLock { $0.append(producer.withLock { $0 } == ObjectIdentifier(Thread.current)) }
            recorder.record(event)
        }
        #expect(await recorder.waitForTerminal())
        #expect(recorder.values == [1, 2])
        #expect(sameThread.withLock { $0 } == [true, true, true])
    }

    @Test func current_offTheKnownContexts_fallsBackToTheGlobalQueue() async {
        let described = Mutex<String>("")
        let done = Checkpoint()
        DispatchQueue.global().async {
            described.withLock { $0 = CallbackContext.current.description }
            done.fulfill()
        }
        #expect(await done.wait())
        #expect(described.withLock { $0 }.hasPrefix("queue("))
    }
}

/// Runs a block on a run loop through the library's own delivery (a zero-interval timer).
enum CallbackContextProbe {
    static func schedule(on loop: RunLoop, _ block: @escaping @Sendable () -> Void) {
        Command<Void> { result in
            result.succeed()
            return nil
        }.execute(on: .runLoop(loop)) { event in
            if event.isTerminal { block() }
        }
    }
}
