import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

/// Commands in a user's own `OperationQueue`, as an addDependency-style workflow uses them: next to
/// `BlockOperation`s, in any insertion order, on serial and wide queues, suspended, cancelled.
@Suite struct UserQueueTests {

    /// Every shape, width, mix of commands (ending now or later) and block operations, and insertion
    /// order: each operation runs once, after every dependency ended, commands on the user's queue;
    /// `waitUntilAllOperationsAreFinished` returns, every `completionBlock` fires, the queue empties.
    @Test(arguments: Shape.all)
    func userQueue_anyWidthAndOrder_runsEachOnceAfterItsDependencies(shape: Shape) async {
        let mixes: [[NodeKind]] = [
            [.commandNow, .commandLater, .commandNow, .commandLater],
            [.block, .commandNow, .block, .commandLater],
            [.commandLater, .block, .commandNow, .block],
        ]
        for width in [1, 2, OperationQueue.defaultMaxConcurrentOperationCount] {
            for mix in mixes {
                for order in permutations(shape.count) {
                    let failure = await runOnUserQueue(shape: shape, width: width, kinds: mix, order: order)
                    #expect(failure == nil, "\(shape) width \(width) kinds \(mix) order \(order): \(failure ?? "")")
                    if failure != nil { return }
                }
            }
        }
    }

    /// One graph on one user queue; a description of what went wrong, or nil.
    private func runOnUserQueue(shape: Shape, width: Int, kinds: [NodeKind], order: [Int]) async -> String? {
        let log = StepLog()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = width
        let operations = (0..<shape.count).map { makeOperation($0, kinds[$0], log: log) }
        for (dependent, dependency) in shape.edges {
            operations[dependent].addDependency(operations[dependency])
        }
        let completions = Checkpoint(count: shape.count)
        for operation in operations { operation.completionBlock = { completions.fulfill() } }
        // Half the orders one by one, half in one batch.
        if order.first == 0 {
            add(order.map { operations[$0] }, to: queue)
        } else {
            for index in order { queue.addOperation(operations[index]) }
        }
        guard await allFinished(queue, seconds: 30) else { return "waitUntilAllOperationsAreFinished hung" }
        guard await completions.wait(seconds: 30) else { return "a completionBlock did not fire" }
        if queue.operationCount != 0 { return "operationCount \(queue.operationCount)" }
        let entries = log.entries
        for node in 0..<shape.count {
            guard let entry = entries[node], entry.runs == 1 else {
                return "n\(node) ran \(entries[node]?.runs ?? 0) times"
            }
            for dependency in shape.dependencies(of: node) {
                let ended = entries[dependency]?.endedAt ?? .max
                if ended > entry.startedAt { return "n\(node) started before n\(dependency) ended" }
            }
            if kinds[node] != .block && entry.queue != ObjectIdentifier(queue) {
                return "n\(node) did not run on the user's queue"
            }
            if !operations[node].isFinished { return "n\(node) not finished" }
        }
        return nil
    }

    /// `cancelAllOperations()` on a suspended queue: every command ends cancelled without running,
    /// every block operation is cancelled; resumed, the queue starts and finishes them all.
    @Test func cancelAllOperations_onASuspendedQueue_endsEveryOperation_noneRuns() async {
        for mix: [NodeKind] in [
            [.commandNow, .block, .commandLater, .block], [.commandLater, .commandNow, .commandNow, .commandLater],
        ] {
            let log = StepLog()
            let queue = OperationQueue()
            queue.isSuspended = true
            let operations = (0..<4).map { makeOperation($0, mix[$0], log: log) }
            for (dependent, dependency) in Shape.diamond.edges {
                operations[dependent].addDependency(operations[dependency])
            }
            let completions = Checkpoint(count: 4)
            for operation in operations { operation.completionBlock = { completions.fulfill() } }
            for operation in operations.reversed() { queue.addOperation(operation) }
            queue.cancelAllOperations()
            // Foundation's rule: cancelled means ready, but not finished until the queue starts it.
            #expect(operations.allSatisfy { $0.isCancelled && $0.isReady && !$0.isFinished })
            queue.isSuspended = false
            #expect(await allFinished(queue))
            #expect(await completions.wait())
            #expect(log.entries.isEmpty)
            #expect(queue.operationCount == 0)
            for case let command as Command<Int> in operations {
                #expect(command.state.isCancelledState)
            }
        }
    }

    /// `cancelAllOperations()` while the root runs: the root's cancelable is called, dependents that
    /// are commands end cancelled, nothing after the root runs.
    @Test func cancelAllOperations_whileTheRootRuns_endsTheGraph() async {
        let started = Checkpoint()
        let cancelled = Checkpoint()
        let root = Command<Int> { result in
            started.fulfill()
            // The cancelable keeps the result: the run is still going when the cancel comes.
            return BlockCancelable {
                withExtendedLifetime(result) { cancelled.fulfill() }
            }
        }
        let log = StepLog()
        let dependents = [makeOperation(1, .commandNow, log: log), makeOperation(2, .block, log: log)]
        for dependent in dependents { dependent.addDependency(root) }
        let queue = OperationQueue()
        add(dependents + [root], to: queue)
        #expect(await started.wait())
        queue.cancelAllOperations()
        #expect(await cancelled.wait())
        #expect(await allFinished(queue))
        #expect(log.entries.isEmpty)
        #expect(root.state.isCancelledState)
        #expect((dependents[0] as? Command<Int>)?.state.isCancelledState == true)
    }

    // MARK: - What a new user hit (issue: the Operation contract), one test each

    /// 1. `b.addDependency(a)`, both in one queue: serial with the dependent first, and wide with
    /// `addOperations(_:waitUntilFinished: true)` from a plain thread, 20 times.
    @Test func twoCommands_inOneUserQueue_runInDependencyOrder() async {
        for serial in [true, false] {
            for _ in 0..<20 {
                let log = StepLog()
                let a = makeOperation(0, .commandLater, log: log)
                let b = makeOperation(1, .commandNow, log: log)
                b.addDependency(a)
                let queue = OperationQueue()
                if serial { queue.maxConcurrentOperationCount = 1 }
                let done = Checkpoint()
                let thread = Thread {
                    queue.addOperations(serial ? [b, a] : [a, b], waitUntilFinished: true)
                    done.fulfill()
                }
                thread.start()
                #expect(await done.wait(seconds: 30))
                let entries = log.entries
                #expect(entries[0]?.runs == 1 && entries[1]?.runs == 1)
                #expect((entries[0]?.endedAt ?? .max) < (entries[1]?.startedAt ?? -1))
            }
        }
    }

    /// `addBarrierBlock` while something still runs, then commands and block operations added behind
    /// it: `addOperation` returns (it hung: Foundation makes the barrier a dependency of the new
    /// operation under the queue's lock and reads `isReady`, which answered `true` without asking
    /// `super`, so the queue scheduled inside its own lock), and the barrier runs before every
    /// operation added after it. Wide and serial queues, commands and blocks in both orders.
    @Test(arguments: [1, 4])
    func operationsAddedBehindABarrier_doNotHang_andRunAfterIt(width: Int) async {
        let log = Log()
        let running = Locked<CommandResult<Void>?>(nil)
        let started = Checkpoint()
        let first = Command<Void> { result in
            running.withLock { $0 = result }
            started.fulfill()
            return nil
        }
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = width
        queue.addOperation(first)  // something still running
        #expect(await started.wait())
        queue.addBarrierBlock { log.append("barrier") }
        var behind: [Operation] = []
        for index in 0..<4 {
            if index % 2 == 0 {
                let command = Command<Void> { result in
                    log.append("command \(index)")
                    result.succeed()
                    return nil
                }
                command.name = "behind \(index)"
                behind.append(command)
            } else {
                behind.append(BlockOperation { log.append("block \(index)") })
            }
        }
        let added = Checkpoint()
        let adding = behind
        // On a thread of its own: a hang fails the wait below instead of the whole run.
        Thread {
            for operation in adding { queue.addOperation(operation) }
            added.fulfill()
        }.start()
        #expect(await added.wait(seconds: 30))
        #expect(log.all.isEmpty)  // the barrier waits for `first`, the rest for the barrier
        running.withLock { $0 }?.succeed()
        #expect(await allFinished(queue, seconds: 30))
        let entries = log.all
        #expect(entries.first == "barrier")
        #expect(Set(entries.dropFirst()) == ["command 0", "block 1", "command 2", "block 3"])
        #expect(behind.allSatisfy { $0.isFinished })
    }

    /// The issue's snippet as written: a `BlockOperation` blocked on a semaphore (the user's own
    /// code), `addBarrierBlock`, then `addOperation(command)` (from a thread of its own, so a hang
    /// fails the bounded wait instead of the run). The semaphore is signalled once the add returned.
    @Test func barrierSnippet_asWritten_addOperationReturns_barrierRunsFirst() async {
        let log = Log()
        let command = Command<Void> { result in
            log.append("command")
            result.succeed()
            return nil
        }
        let gate = DispatchSemaphore(value: 0)
        let q = OperationQueue()
        q.maxConcurrentOperationCount = 4
        q.addOperation(BlockOperation { gate.wait() })  // something still running
        q.addBarrierBlock { log.append("barrier") }
        let added = Checkpoint()
        Thread {
            q.addOperation(command)  // never returned before the fix
            added.fulfill()
        }.start()
        let returned = await added.wait(seconds: 30)
        #expect(returned)
        gate.signal()
        #expect(await finished(command, seconds: 30))
        #expect(log.all == ["barrier", "command"])
    }

    /// 2. Width 1, the command added before the `BlockOperation` it depends on: the command is not
    /// ready, so it does not take the only slot.
    @Test func serialQueue_commandBeforeItsBlockDependency_doesNotHang() async {
        let log = StepLog()
        let block = makeOperation(0, .block, log: log)
        let command = makeOperation(1, .commandNow, log: log)
        command.addDependency(block)
        #expect(!command.isReady)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.addOperation(command)
        queue.addOperation(block)
        #expect(await allFinished(queue, seconds: 30))
        #expect(log.entries[1]?.runs == 1)
        #expect(command.isReady && command.isFinished)
    }

    /// 3. A dependency in a suspended user queue, then `dependent.execute`: no trap. The documented
    /// rule: `execute` runs the pending commands the executed one depends on (the engine cannot see
    /// into a user's queue), so the dependency runs once, on its own queue; the user's queue, resumed,
    /// empties.
    @Test func dependencyInASuspendedUserQueue_thenExecute_runsItOnce() async {
        let log = StepLog()
        let dependency = makeOperation(0, .commandNow, log: log)
        let dependent = Command<Int> { result in
            result.succeed(1)
            return nil
        }
        dependent.addDependency(dependency)
        let queue = OperationQueue()
        queue.isSuspended = true
        queue.addOperation(dependency)
        #expect(await terminalState(of: dependent, start: true).isCompletedState)
        #expect(log.entries[0]?.runs == 1)
        queue.isSuspended = false
        #expect(await allFinished(queue))
        #expect(log.entries[0]?.runs == 1)
    }

    /// 4. `start()` and `execute()` on one fresh command from two threads, and `start()` twice: the
    /// run happens once, every observer gets its end, nothing traps (10,000 tries).
    @Test func startAndExecute_racingOnAFreshCommand_runOnce() async {
        let tries = 10_000
        let runs = Locked(0)
        let ends = Checkpoint(count: tries)
        let racers = DispatchQueue(label: "racers", attributes: .concurrent)
        for attempt in 0..<tries {
            let command = Command<Int> { result in
                runs.withLock { $0 += 1 }
                result.succeed(attempt)
                return nil
            }
            command.observeState(on: .immediate) { state in if state.isTerminal { ends.fulfill() } }
            racers.async { command.start() }
            racers.async { command.execute(on: .immediate) { _ in } }
            if attempt % 3 == 0 { racers.async { command.start() } }
        }
        #expect(await ends.wait(seconds: 120))
        #expect(runs.withLock { $0 } == tries)
    }

    /// 4b. `start()` after `execute()` on one thread: the run stays on the engine's queue, once.
    @Test func startAfterExecute_sameThread_runsOnceOnTheEngineQueue() async {
        let seen = Locked<[Bool]>([])
        let command = Command<Int> { result in
            seen.withLock { $0.append(OperationQueue.current != nil) }
            result.succeed(1)
            return nil
        }
        let recorder = Recorder<Int>()
        command.execute(on: .immediate, recorder.handler)
        command.start()
        #expect(await recorder.waitForTerminal())
        #expect(await finished(command))
        #expect(seen.withLock { $0 } == [true])
    }

    /// 5. A `run` that suspends its own queue: the queue is not given to the next command.
    @Test func runSuspendingItsOwnQueue_doesNotStallTheNextCommand() async {
        let suspended = Locked<OperationQueue?>(nil)
        let first = Command<Int> { result in
            let queue = OperationQueue.current
            queue?.isSuspended = true
            suspended.withLock { $0 = queue }
            result.succeed(1)
            return nil
        }
        first.execute(on: .immediate) { _ in }
        #expect(await finished(first))
        for _ in 0..<50 {
            let used = Locked<OperationQueue?>(nil)
            let next = Command<Int> { result in
                used.withLock { $0 = OperationQueue.current }
                result.succeed(2)
                return nil
            }
            let recorder = Recorder<Int>()
            next.execute(on: .immediate, recorder.handler)
            #expect(await recorder.waitForTerminal(seconds: 30))
            let reused = used.withLock { $0 } === suspended.withLock { $0 }
            #expect(!reused)
        }
        suspended.withLock { $0?.isSuspended = false }
    }

    /// 7. A cancelled command stays unfinished until something starts it: in a suspended queue, it
    /// finishes when the queue is resumed (without running); in no queue, a queue it is added to later
    /// starts and finishes it.
    @Test func cancelledCommand_finishesOnlyWhenStarted() async {
        let log = StepLog()
        let queued = makeOperation(0, .commandNow, log: log)
        let queue = OperationQueue()
        queue.isSuspended = true
        queue.addOperation(queued)
        queued.cancel()
        #expect(queued.isCancelled && queued.isReady && !queued.isFinished)
        let loose = makeOperation(1, .commandNow, log: log)
        loose.cancel()
        #expect(loose.isCancelled && !loose.isFinished)
        queue.addOperation(loose)
        queue.isSuspended = false
        #expect(await allFinished(queue))
        #expect(queued.isFinished && loose.isFinished)
        #expect(log.entries.isEmpty)
    }

    /// 8. A command cancelled while waiting in a user queue for an unfinished dependency, then the
    /// dependency finishing: the cancelled one is ready at once, the queue finishes it, nothing traps.
    @Test func commandCancelledWhileWaitingInAUserQueue_thenTheDependencyEnds() async {
        for _ in 0..<200 {
            let release = Checkpoint()
            let gate = Command<Int> { result in
                Task {
                    _ = await release.wait()
                    result.succeed(0)
                }
                return nil
            }
            let log = StepLog()
            let waiting = makeOperation(1, .commandNow, log: log)
            let other = makeOperation(2, .commandNow, log: log)
            waiting.addDependency(gate)
            other.addDependency(gate)
            let queue = OperationQueue()
            add([waiting, other, gate], to: queue)
            waiting.cancel()
            #expect(await finished(waiting))
            release.fulfill()
            #expect(await allFinished(queue))
            #expect(log.entries[1] == nil && log.entries[2]?.runs == 1)
        }
    }

    /// 9. A command started by a user's queue runs there: `OperationQueue.current` is that queue, and
    /// its `underlyingQueue` is the one the work runs on.
    @Test func commandStartedByAUserQueue_runsOnThatQueue_andItsUnderlyingQueue() async {
        let key = DispatchSpecificKey<Int>()
        let dispatchQueue = DispatchQueue(label: "user's underlying queue")
        dispatchQueue.setSpecific(key: key, value: 42)
        let queue = OperationQueue()
        queue.underlyingQueue = dispatchQueue
        let seen = Locked<(ObjectIdentifier?, Int?)>((nil, nil))
        let command = Command<Int> { result in
            seen.withLock {
                $0 = (OperationQueue.current.map(ObjectIdentifier.init), DispatchQueue.getSpecific(key: key))
            }
            result.succeed(1)
            return nil
        }
        queue.addOperation(command)
        #expect(await allFinished(queue))
        let (current, specific) = seen.withLock { $0 }
        #expect(current == ObjectIdentifier(queue))
        #expect(specific == 42)
        withExtendedLifetime(dispatchQueue) {}
    }

    /// A plain `BlockOperation` may depend on a command the engine runs: Foundation learns that the
    /// command finished from its KVO, and the block runs after it.
    @Test func blockOperationDependingOnAnExecutedCommand_runsAfterIt() async {
        let log = StepLog()
        let command = makeOperation(0, .commandLater, log: log) as! Command<Int>
        let block = makeOperation(1, .block, log: log)
        block.addDependency(command)
        let queue = OperationQueue()
        queue.addOperation(block)
        command.execute(on: .immediate) { _ in }
        #expect(await allFinished(queue))
        let entries = log.entries
        #expect((entries[0]?.endedAt ?? .max) < (entries[1]?.startedAt ?? -1))
    }
}
