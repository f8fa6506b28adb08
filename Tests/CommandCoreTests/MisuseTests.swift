@testable import CommandCore
import CommandTestSupport
import Foundation
import Synchronization
import Testing

/// Each misuse gets a clear error or diagnostic naming the command, and observers still get a
/// terminal event: nothing is lost, nothing crashes.
@Suite struct MisuseTests {
    private func named(_ name: String, _ log: Log? = nil) -> Command<Int> {
        let command = Command<Int> { result in
            log?.append(name)
            result.succeed(1)
            return nil
        }
        command.name = name
        return command
    }

    @Test func cycle_failsEveryCommandOfIt_namingTheCycleInOrder() async {
        let log = Log()
        let fetch = named("fetch", log)
        let parse = named("parse", log)
        let save = named("save", log)
        fetch.addDependency(parse)
        parse.addDependency(fetch)
        save.addDependency(fetch)
        let recorder = Recorder<Int>()
        fetch.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        let error = recorder.terminal?.error as? CommandError
        #expect(error?.code == .dependencyCycle)
        #expect(error?.cycle == ["fetch", "parse", "fetch"])
        #expect(error?.message.contains("fetch -> parse -> fetch") == true)
        guard case .failed(let parseError as CommandError) = parse.state else { Issue.record("\(parse.state)"); return }
        #expect(parseError.code == .dependencyCycle)
        // A dependent of the cycle is cancelled through the usual rule, not left waiting.
        let saved = Recorder<Int>()
        save.execute(on: .immediate, saved.handler)
        #expect(await saved.waitForTerminal())
        #expect(saved.terminal?.commandError?.code == .dependencyFailed)
        #expect(log.all.isEmpty)
    }

    @Test func selfDependency_failsWhenExecuted() async {
        let command = named("loop")
        command.addDependency(command)
        #expect(command.dependencies.isEmpty)
        let recorder = Recorder<Int>()
        command.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        let error = recorder.terminal?.error as? CommandError
        #expect(error?.code == .selfDependency)
        #expect(error?.message.contains("'loop'") == true)
    }

    @Test func dependencyAddedAfterStart_failsTheCommandWithAClearError() async {
        let gate = Gate()
        let running = gate.command()
        running.name = "running"
        let recorder = Recorder<Int>()
        running.execute(on: .immediate, recorder.handler)
        #expect(await gate.started.wait())
        running.addDependency(named("late"))
        #expect(await recorder.waitForTerminal())
        let error = recorder.terminal?.error as? CommandError
        #expect(error?.code == .dependencyAddedAfterStart)
        #expect(error?.dependency == "late")
        #expect(error?.message.contains("'running'") == true)
    }

    @Test func cycleClosedWhileWaiting_isRefusedWhenAdded() async {
        let gate = Gate()
        let root = gate.command()
        root.name = "root"
        let a = named("a")
        let b = named("b")
        a.addDependency(root)
        b.addDependency(a)
        let recorder = Recorder<Int>()
        b.execute(on: .immediate, recorder.handler)
        #expect(await gate.started.wait())
        a.addDependency(b)  // a waits for root; b waits for a: this edge would close a -> b -> a
        guard case .failed(let error as CommandError) = a.state else { Issue.record("\(a.state)"); return }
        #expect(error.code == .dependencyCycle)
        #expect(error.cycle == ["a", "b", "a"])
        gate.complete()
        #expect(await recorder.waitForTerminal())
        #expect(recorder.terminal?.commandError?.code == .dependencyFailed)
    }

    @Test func eventsAfterTheTerminalOne_areIgnored_withADiagnostic() async {
        let resultBox = Mutex<CommandResult<Int>?>(nil)
        let command = Command<Int> { result in
            resultBox.withLock { $0 = result }
            result.succeed(1)
            return nil
        }
        command.name = "done"
        let probe = DiagnosticsProbe(for: command)
        let recorder = Recorder<Int>()
        command.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        let result = resultBox.withLock { $0 }
        result?.send(2)
        result?.complete()
        result?.fail(CocoaError(.featureUnsupported))
        #expect(recorder.values == [1])
        #expect(recorder.eventsAfterTerminal == 0)
        let diagnostics = probe.diagnostics
        #expect(diagnostics.count == 3)
        #expect(diagnostics.allSatisfy { $0.code == .alreadyFinished && $0.command == "done" })
    }

    @Test func resultReleasedWithoutATerminalEvent_failsInsteadOfHanging() async {
        let command = Command<Int> { result in
            result.send(1)
            return nil  // forgot to complete; the result is released here
        }
        let recorder = Recorder<Int>()
        command.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        #expect(recorder.values == [1])
        #expect((recorder.terminal?.error as? CommandError)?.code == .resultAbandoned)
    }

    @Test func commandWithoutWork_failsWithMissingRun() async {
        let recorder = Recorder<Int>()
        Command<Int>().execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        #expect((recorder.terminal?.error as? CommandError)?.code == .missingRun)
    }

    @Test func removeDependencyAfterExecute_isIgnoredWithADiagnostic() async {
        let gate = Gate()
        let first = gate.command()
        let second = named("second")
        second.addDependency(first)
        let probe = DiagnosticsProbe(for: second)
        let recorder = Recorder<Int>()
        second.execute(on: .immediate, recorder.handler)
        second.removeDependency(first)
        #expect(second.dependencies.count == 1)
        #expect(probe.diagnostics.count == 1)
        #expect(await gate.started.wait())
        gate.complete()
        #expect(await recorder.waitForTerminal())
        #expect(recorder.values == [1])
    }

    @Test func executeQueueReplacedWhileRunning_isIgnoredWithADiagnostic() async {
        let gate = Gate()
        let command = gate.command()
        let probe = DiagnosticsProbe(for: command)
        let recorder = Recorder<Int>()
        command.execute(on: .immediate, recorder.handler)
        #expect(await gate.started.wait())
        command.executeQueue = OperationQueue()
        #expect(probe.diagnostics.count == 1)
        gate.complete()
        #expect(await recorder.waitForTerminal())
        #expect(recorder.terminal?.isCompleted == true)
    }

    @Test func executeAfterCancel_deliversTheCancellation() async {
        let command = named("cancelled")
        command.cancel()
        let recorder = Recorder<Int>()
        command.execute(recorder.handler)
        #expect(await recorder.waitForTerminal())
        #expect(recorder.terminal?.commandError?.code == .cancelled)
        #expect(recorder.terminal?.commandError?.command == "cancelled")
    }
}

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
