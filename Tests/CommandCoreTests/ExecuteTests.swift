import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

final class Add: Command<Int>, @unchecked Sendable {
    let a: Int
    let b: Int
    init(_ a: Int, _ b: Int) {
        self.a = a
        self.b = b
        super.init()
    }
    override func run(_ result: CommandResult<Int>) -> (any Cancelable)? {
        result.succeed(a + b)
        return nil
    }
}

/// A command that sends its values and completes later, when the test says so.
final class Gate: Sendable {
    private let result = Mutex<CommandResult<Int>?>(nil)
    let started = Checkpoint()

    func command() -> Command<Int> {
        Command<Int> { [self] result in
            self.result.withLock { $0 = result }
            started.fulfill()
            return nil
        }
    }

    func send(_ value: Int) { result.withLock { $0 }?.send(value) }
    func complete() { result.withLock { $0 }?.complete() }
    func release() { result.withLock { $0 = nil } }
}

@Suite struct ExecuteTests {
    @Test func subclass_runs_andDeliversValueThenCompleted() async {
        let recorder = Recorder<Int>()
        Add(2, 3).execute(recorder.handler)
        #expect(await recorder.waitForTerminal())
        #expect(recorder.values == [5])
        #expect(recorder.terminal?.isCompleted == true)
    }

    @Test func closureCommand_runsOnItsOwnOperationQueue() async {
        let seen = Mutex<OperationQueue?>(nil)
        let command = Command<Int> { result in
            seen.withLock { $0 = OperationQueue.current }
            result.succeed(1)
            return nil
        }
        let recorder = Recorder<Int>()
        command.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        let queue = seen.withLock { $0 }
        #expect(queue != nil)
        #expect(queue !== OperationQueue.main)
    }

    @Test func assignedExecuteQueueAndUnderlyingQueue_areUsed() async {
        let key = DispatchSpecificKey<Int>()
        let underlying = DispatchQueue(label: "underlying")
        underlying.setSpecific(key: key, value: 42)
        let onUnderlying = Mutex(false)
        let command = Command<Int> { result in
            onUnderlying.withLock { $0 = DispatchQueue.getSpecific(key: key) == 42 }
            result.succeed(1)
            return nil
        }
        command.underlyingQueue = underlying
        let recorder = Recorder<Int>()
        command.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        #expect(onUnderlying.withLock { $0 })

        let queue = OperationQueue()
        queue.name = "assigned"
        let seen = Mutex<String?>(nil)
        let second = Command<Int> { result in
            seen.withLock { $0 = OperationQueue.current?.name }
            result.succeed(2)
            return nil
        }
        second.executeQueue = queue
        let recorder2 = Recorder<Int>()
        second.execute(on: .immediate, recorder2.handler)
        #expect(await recorder2.waitForTerminal())
        #expect(seen.withLock { $0 } == "assigned")
    }

    /// A terminal callback, on the callback's own queue, reads the flags as already published: a
    /// completed command `isFinished`, a cancelled one `isCancelled` (the ending posts its KVO
    /// notifications before it schedules its observers' hops; a cancelled command its engine's queue
    /// still holds is finished only when that queue starts it, as Foundation's are). 200 of each.
    @Test func terminalCallback_readsTheFlagsAsPublished() async {
        let callbacks = DispatchQueue(label: "callbacks")
        let wrong = Locked<[String]>([])
        let done = Checkpoint(count: 400)
        for index in 0..<200 {
            let completing = Command<Int> { result in
                result.succeed(index)
                return nil
            }
            completing.execute(on: .queue(callbacks)) { [completing] event in
                guard event.isTerminal else { return }
                if !completing.isFinished { wrong.withLock { $0.append("completed \(index): not finished") } }
                done.fulfill()
            }
            // Keeps its result (a run that lets go of it fails), ends only when cancelled.
            let cancelled = Command<Int> { result in BlockCancelable { _ = result } }
            cancelled.execute(on: .queue(callbacks)) { [cancelled] event in
                guard event.isTerminal else { return }
                if !cancelled.isCancelled { wrong.withLock { $0.append("cancelled \(index): not cancelled") } }
                done.fulfill()
            }
            cancelled.cancel()
        }
        #expect(await done.wait())
        #expect(wrong.withLock { $0 }.isEmpty, "\(wrong.withLock { $0 }.prefix(5))")
    }

    @Test func state_andOperationFlags_agreeThroughTheRun() async {
        let gate = Gate()
        let command = gate.command()
        guard case .pending = command.state else { Issue.record("\(command.state)"); return }
        #expect(!command.isExecuting && !command.isFinished && !command.isCancelled)
        let recorder = Recorder<Int>()
        command.execute(on: .immediate, recorder.handler)
        #expect(await gate.started.wait())
        guard case .executing = command.state else { Issue.record("\(command.state)"); return }
        #expect(command.isExecuting && !command.isFinished)
        gate.complete()
        #expect(await recorder.waitForTerminal())
        guard case .completed = command.state else { Issue.record("\(command.state)"); return }
        #expect(!command.isExecuting && command.isFinished && !command.isCancelled)
    }

    @Test func stateObserver_seesExecutingThenCompleted() async {
        let gate = Gate()
        let command = gate.command()
        let states = Log()
        let done = Checkpoint()
        command.observeState(on: .queue(DispatchQueue(label: "states"))) { state in
            states.append(state.description)
            if state.isTerminal { done.fulfill() }
        }
        command.execute(on: .immediate) { _ in }
        #expect(await gate.started.wait())
        gate.complete()
        #expect(await done.wait())
        #expect(states.all == ["executing", "completed"])
    }

    @Test func executeAgain_replaysEverythingThenLiveEvents() async {
        let gate = Gate()
        let command = gate.command()
        let first = Recorder<Int>()
        command.execute(on: .immediate, first.handler)
        #expect(await gate.started.wait())
        gate.send(1)
        gate.send(2)
        let second = Recorder<Int>()
        command.execute(on: .queue(DispatchQueue(label: "late")), second.handler)
        gate.send(3)
        gate.complete()
        #expect(await first.waitForTerminal())
        #expect(await second.waitForTerminal())
        #expect(first.values == [1, 2, 3])
        #expect(second.values == [1, 2, 3])
        // After the end, a third executor still gets the whole run; the command ran once.
        let third = Recorder<Int>()
        command.execute(third.handler)
        #expect(await third.waitForTerminal())
        #expect(third.values == [1, 2, 3] && third.terminal?.isCompleted == true)
    }

    @Test func failure_isDeliveredAsFailed() async {
        struct Boom: Error {}
        let command = Command<Int> { result in
            result.send(1)
            result.fail(Boom())
            return nil
        }
        let recorder = Recorder<Int>()
        command.execute(recorder.handler)
        #expect(await recorder.waitForTerminal())
        #expect(recorder.values == [1])
        #expect(recorder.terminal?.error is Boom)
        guard case .failed(let error) = command.state, error is Boom else { Issue.record("\(command.state)"); return }
    }

    @Test func portingBlockShape_getsCommandValueErrorAndCompletion() async {
        let command = Add(1, 1)
        let calls = Log()
        let done = Checkpoint()
        command.execute { cmd, value, error, isCompleted in
            calls.append("\(cmd === command) \(value.map(String.init) ?? "nil") \(error == nil) \(isCompleted)")
            if isCompleted || error != nil { done.fulfill() }
        }
        #expect(await done.wait())
        #expect(calls.all == ["true 2 true false", "true nil true true"])
    }

    final class Callback: CommandCallback, Sendable {
        typealias Output = Int
        // Written by the callbacks (which the delivery contract serialises) and read by the test: a
        // lock makes the hand-over visible to ThreadSanitizer, whatever thread resumes the test.
        private let log = Locked<[String]>([])
        var received: [String] { log.withLock { $0 } }
        let done = Checkpoint()
        func command(_ command: Command<Int>, didSend value: Int) { log.withLock { $0.append("value \(value)") } }
        func commandDidComplete(_ command: Command<Int>) {
            log.withLock { $0.append("completed") }
            done.fulfill()
        }
        func command(_ command: Command<Int>, didFailWith error: any Error) {
            log.withLock { $0.append("failed") }
            done.fulfill()
        }
    }

    @Test func callbackObject_receivesEvents() async {
        let callback = Callback()
        Add(20, 22).execute(callback: callback)
        #expect(await callback.done.wait())
        #expect(callback.received == ["value 42", "completed"])
    }

    @Test func callbackObject_isHeldWeakly_andReleasedMidRunGetsNothing() async {
        let gate = Gate()
        let command = gate.command()
        var callback: Callback? = Callback()
        let weakCallback = WeakHolder(callback)
        command.execute(on: .immediate, callback: callback!)
        #expect(await gate.started.wait())
        gate.send(1)
        #expect(callback?.received == ["value 1"])
        callback = nil
        #expect(weakCallback.value == nil)  // the command did not keep it alive
        let after = Recorder<Int>()
        command.execute(on: .immediate, after.handler)
        gate.send(2)
        gate.complete()
        #expect(await after.waitForTerminal())
        #expect(after.values == [1, 2])  // the run went on; nothing crashed delivering to the dead callback
        #expect(command.observerCount == 0)
    }

    @Test func succeed_onVoidCommand_sendsOneValueAndCompletes() async {
        let command = Command<Void> { result in
            result.succeed()
            return nil
        }
        let recorder = Recorder<Void>()
        command.execute(recorder.handler)
        #expect(await recorder.waitForTerminal())
        #expect(recorder.values.count == 1 && recorder.terminal?.isCompleted == true)
    }

    @Test func addedToAnOperationQueueByHand_runsAndFinishes() async {
        let command = Add(1, 2)
        let recorder = Recorder<Int>()
        command.observe(on: .immediate, recorder.handler)
        let queue = OperationQueue()
        queue.addOperation(command)
        #expect(await recorder.waitForTerminal())
        #expect(recorder.values == [3])
        #expect(command.isFinished)
    }

    @Test func plainOperationDependingOnACommand_isStartedByFoundationAfterIt() async {
        let command = Add(1, 2)
        let ran = Checkpoint()
        let commandFinishedFirst = Mutex(false)
        let plain = BlockOperation {
            commandFinishedFirst.withLock { $0 = command.isFinished }
            ran.fulfill()
        }
        plain.addDependency(command)
        OperationQueue().addOperation(plain)
        command.execute { _ in }
        #expect(await ran.wait())
        #expect(commandFinishedFirst.withLock { $0 })
    }
}

/// A weak reference for a test to check a release with (not `weak let`, which needs Swift 6.2.3).
final class WeakHolder<Value: AnyObject> {
    weak var value: Value?
    init(_ value: Value?) { self.value = value }
}
