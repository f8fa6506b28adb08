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
}
