import CommandTestSupport
import Foundation
import Testing

@testable import CommandCore

/// Commands that log when they run, so tests can check the order.
private func logging(_ name: String, _ log: Log, fail: Bool = false) -> Command<String> {
    struct Failure: Error {}
    let command = Command<String> { result in
        log.append(name)
        if fail { result.fail(Failure()) } else { result.succeed(name) }
        return nil
    }
    command.name = name
    return command
}

@Suite struct DependencyTests {
    @Test func chain_runsInDependencyOrder_eachOnce_withoutHanging() async {
        let count = 3000
        let log = Log()
        let commands = (0..<count).map { logging("\($0)", log) }
        for index in 1..<count { commands[index].addDependency(commands[index - 1]) }
        let recorder = Recorder<String>()
        commands[count - 1].execute(on: .immediate, recorder.handler)  // executes the whole chain
        #expect(await recorder.waitForTerminal())
        #expect(log.all == (0..<count).map { "\($0)" })
        #expect(commands.allSatisfy { $0.isFinished })
    }

    @Test func diamonds_runEveryCommandAfterAllItsDependencies() async {
        // Layers of diamonds: top -> (left, right) -> bottom -> (left, right) -> ... 1,000 diamonds.
        let log = Log()
        var bottom = logging("start", log)
        var all = [bottom]
        for index in 0..<1000 {
            let left = logging("L\(index)", log)
            let right = logging("R\(index)", log)
            let join = logging("J\(index)", log)
            left.addDependency(bottom)
            right.addDependency(bottom)
            join.addDependency(left)
            join.addDependency(right)
            all += [left, right, join]
            bottom = join
        }
        let recorder = Recorder<String>()
        bottom.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        let order = log.all
        #expect(order.count == all.count)
        #expect(Set(order).count == all.count)  // each once
        let position = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0) })
        for command in all {
            for dependency in command.dependencies {
                #expect(position[dependency.name!]! < position[command.name!]!)
            }
        }
    }

    @Test func dependencies_listsTheEdges_asFoundationDoes() {
        let a = Add(1, 1)
        let b = Add(2, 2)
        let c = Add(3, 3)
        c.addDependency(a)
        c.addDependency(b)
        c.addDependency(a)  // duplicates are ignored, as Foundation does
        #expect(c.dependencies.count == 2)
        #expect(c.dependencies[0] === a && c.dependencies[1] === b)
        c.removeDependency(a)
        #expect(c.dependencies.count == 1 && c.dependencies[0] === b)
    }

    @Test func failedDependency_dependentsDoNotRun_andEndCancelledNamingIt() async {
        let log = Log()
        let fetch = logging("fetch", log, fail: true)
        let parse = logging("parse", log)
        let save = logging("save", log)
        parse.addDependency(fetch)
        save.addDependency(parse)
        let recorder = Recorder<String>()
        save.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        #expect(log.all == ["fetch"])
        guard case .cancelled(let error) = recorder.terminal else {
            Issue.record("terminal \(String(describing: recorder.terminal))"); return
        }
        #expect(error.code == .dependencyCancelled)
        #expect(error.dependency == "parse")
        guard case .cancelled(let parseError) = parse.state else { Issue.record("\(parse.state)"); return }
        #expect(parseError.code == .dependencyFailed)
        #expect(parseError.dependency == "fetch")
        #expect(parseError.message.contains("'parse'") && parseError.message.contains("'fetch'"))
        #expect(parse.isCancelled && parse.isFinished && save.isCancelled && save.isFinished)
    }

    @Test func cancelledDependency_dependentsDoNotRun() async {
        let log = Log()
        let gate = Gate()
        let first = gate.command()
        first.name = "first"
        let second = logging("second", log)
        second.addDependency(first)
        let recorder = Recorder<String>()
        second.execute(on: .immediate, recorder.handler)
        #expect(await gate.started.wait())
        first.cancel()
        #expect(await recorder.waitForTerminal())
        #expect(log.all.isEmpty)
        #expect(recorder.terminal?.commandError?.code == .dependencyCancelled)
        #expect(recorder.terminal?.commandError?.dependency == "first")
    }

    @Test func deepChain_failureAtTheRoot_propagatesWithoutRecursion() async {
        // 100,000 commands: propagation by recursion would overflow the stack.
        let count = 100_000
        let log = Log()
        let commands = (0..<count).map { _ in Command<Int> { _ in nil } }
        let root = logging("root", log, fail: true)
        commands[0].addDependency(root)
        for index in 1..<count { commands[index].addDependency(commands[index - 1]) }
        let recorder = Recorder<Int>()
        commands[count - 1].execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        #expect(recorder.terminal?.commandError?.code == .dependencyCancelled)
        #expect(commands.allSatisfy { $0.isCancelled })
    }

    @Test func cancelPending_neverRuns_andFinishesPromptly_evenWithUnfinishedDependencies() async {
        let gate = Gate()
        let dependency = gate.command()
        let log = Log()
        let dependent = logging("dependent", log)
        dependent.addDependency(dependency)
        let recorder = Recorder<String>()
        dependent.execute(on: .immediate, recorder.handler)
        #expect(await gate.started.wait())
        dependent.cancel()
        #expect(dependent.isFinished && dependent.isCancelled)
        #expect(await recorder.waitForTerminal())
        #expect(recorder.terminal?.commandError?.code == .cancelled)
        // The dependency finishing later touches the cancelled dependent safely (it was kept alive).
        gate.complete()
        let after = Recorder<Int>()
        dependency.execute(on: .immediate, after.handler)
        #expect(await after.waitForTerminal())
        #expect(log.all.isEmpty)
    }

    @Test func cancelBeforeExecute_neverCallsRun() async {
        let log = Log()
        let command = logging("never", log)
        command.cancel()
        // Foundation's rule: cancelled and ready, but unfinished until something starts it.
        #expect(!command.isFinished && command.isCancelled && command.isReady)
        let recorder = Recorder<String>()
        command.execute(recorder.handler)
        #expect(await recorder.waitForTerminal())
        #expect(recorder.events.count == 1 && recorder.terminal?.isCancelled == true)
        #expect(log.all.isEmpty)
    }

    @Test func plainOperationDependency_isWaitedFor_andItsCompletionBlockStillRuns() async {
        let log = Log()
        let completionRan = Checkpoint()
        let plain = BlockOperation { log.append("plain") }
        plain.completionBlock = { completionRan.fulfill() }
        let command = logging("command", log)
        command.addDependency(plain)
        let recorder = Recorder<String>()
        command.execute(on: .immediate, recorder.handler)
        #expect(log.all.isEmpty)  // the plain operation is not started by the command
        OperationQueue().addOperation(plain)
        #expect(await recorder.waitForTerminal())
        #expect(await completionRan.wait())
        #expect(log.all == ["plain", "command"])
    }

    @Test func cancelledPlainOperationDependency_cancelsTheDependent() async {
        let plain = BlockOperation {}
        let log = Log()
        let command = logging("command", log)
        command.addDependency(plain)
        let recorder = Recorder<String>()
        command.execute(on: .immediate, recorder.handler)
        plain.cancel()
        OperationQueue().addOperation(plain)
        #expect(await recorder.waitForTerminal())
        #expect(recorder.terminal?.commandError?.code == .dependencyCancelled)
        #expect(log.all.isEmpty)
    }

    @Test func dependencyAddedWhileWaiting_isHonoured() async {
        let gate = Gate()
        let first = gate.command()
        let log = Log()
        let late = logging("late", log)
        let last = logging("last", log)
        last.addDependency(first)
        let recorder = Recorder<String>()
        last.execute(on: .immediate, recorder.handler)
        #expect(await gate.started.wait())
        last.addDependency(late)  // `last` is waiting for `first`: the new edge counts, `late` is executed
        gate.complete()
        #expect(await recorder.waitForTerminal())
        #expect(log.all == ["late", "last"])
    }

    /// A cycle closed while its commands wait: `p` (executed, waiting on a running gate) gets a
    /// dependency on `q`, which depends on `p`. The edge is searched although it goes to an older
    /// command (an executed command gets no later walk): refused, `p` fails with the cycle named and
    /// `q` ends with it; nothing hangs.
    @Test func cycleClosedWhileWaiting_failsTheCycle_neverHangs() async {
        let gate = Gate()
        let running = gate.command()
        let log = Log()
        let q = logging("q", log)
        let p = logging("p", log)
        p.addDependency(running)
        let pRecorder = Recorder<String>()
        p.execute(on: .immediate, pRecorder.handler)
        #expect(await gate.started.wait())
        q.addDependency(p)
        p.addDependency(q)  // p -> q -> p, closed while p waits: an edge to an older command
        #expect(await pRecorder.waitForTerminal())
        #expect(pRecorder.terminal?.commandError?.code == .dependencyCycle)
        #expect(pRecorder.terminal?.commandError?.cycle == ["p", "q", "p"])
        let qRecorder = Recorder<String>()
        q.execute(on: .immediate, qRecorder.handler)
        #expect(await qRecorder.waitForTerminal())
        #expect(qRecorder.terminal?.commandError?.code == .dependencyFailed)
        gate.complete()
        #expect(log.all.isEmpty)
    }

    /// The window of the issue: an edge closing a cycle added from another thread while the execute
    /// walk holds the command claimed (walked, not yet registered). A 20,000-command chain whose
    /// dependencies are newer than their dependents, so the closing edge (middle -> root) goes to an
    /// older command and is O(1) when the command is pending; the other thread adds it while the walk
    /// runs, at a different point each round. Whatever the moment (pending, claimed, waiting, handed
    /// over), every command ends: the cycle is failed or the edge refused, never a hang.
    @Test(.tags(.stress)) func cycleClosedDuringTheExecuteWalk_neverHangs() async {
        let rounds = StressScale.pick(short: 12, long: 200)
        let size = 20_000
        var outcomes: [String: Int] = [:]
        for round in 0..<rounds {
            // Built and executed on a dedicated thread: 20,000 commands under ThreadSanitizer are
            // seconds of work that must not hold one of the concurrency pool's few threads.
            let recorder = Recorder<Int>()
            let built = Locked<(root: Command<Int>, middle: Command<Int>)?>(nil)
            let seen = Locked<String>("")
            let closed = Checkpoint()
            let walker = Thread {
                var chain: [Command<Int>] = []
                for index in 0..<size {
                    let command = Command<Int> { result in
                        result.succeed(index)
                        return nil
                    }
                    command.name = "c\(index)"
                    chain.append(command)
                }
                for index in 0..<(size - 1) { chain[index].addDependency(chain[index + 1]) }
                let root = chain[0]
                let middle = chain[size / 2 + round * (size / 2) / rounds]
                built.withLock { $0 = (root, middle) }
                let walking = Checkpoint()
                let closer = Thread {
                    // Aims at the window: from the moment the walk claimed `middle` (half a walk
                    // before it registers it) or later.
                    while !walking.isFulfilled {}
                    var state = ""
                    while state.isEmpty || state == "pending" {
                        state = middle.machine.withLock { machine in
                            switch machine.lifecycle {
                            case .pending: "pending"
                            case .claimed: "claimed"
                            case .waiting: "waiting"
                            default: "handed over"
                            }
                        }
                    }
                    middle.addDependency(root)
                    seen.withLock { $0 = state }
                    closed.fulfill()
                }
                closer.stackSize = 512 * 1024
                closer.start()
                walking.fulfill()
                root.execute(on: .immediate, recorder.handler)
            }
            walker.stackSize = 512 * 1024
            walker.start()
            #expect(await recorder.waitForTerminal(), "round \(round): the graph hung")
            guard let (_, middle) = built.withLock({ $0 }) else { continue }
            let ended = Checkpoint()
            middle.observeState(on: .immediate) { if $0.isTerminal { ended.fulfill() } }
            #expect(await ended.wait(), "round \(round): the middle command never ended")
            #expect(await closed.wait())
            let key: String
            switch middle.state {
            case .failed(let error as CommandError): key = "\(error.code)"
            case .cancelled(let error): key = "cancelled \(error.code)"
            default: key = "\(middle.state)"
            }
            outcomes[seen.withLock { $0 } + " -> " + key, default: 0] += 1
        }
        print("cycle during walk: \(outcomes)")
    }
}
