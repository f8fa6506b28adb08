import CommandTestSupport
import Foundation
import Testing

@testable import CommandCore

/// The catalogue of bad inputs: each misuse gets a clear error or diagnostic naming the command and
/// saying what to do, and observers still get a terminal event: nothing is lost, nothing crashes.
///
/// | Misuse | What it gets |
/// |---|---|
/// | dependency cycle | `depend(on:)` throws `dependencyCycle`, `cycle` = the names in order; `addDependency` records the edge (Foundation's rule) and executing fails the cycle's commands with it (a command already waiting refuses the edge and fails at once) |
/// | self-dependency | `selfDependency` when executed |
/// | dependency added after start | `dependencyAddedAfterStart`, naming both commands |
/// | execute after cancel | `.cancelled(cancelled)` delivered to the new observer |
/// | send / complete / fail after the terminal event | ignored, an `alreadyFinished` diagnostic each |
/// | send / complete / fail after a cancel | ignored, silently: the normal race with work that had not seen the cancel |
/// | `dependencyPolicy` set after the command was handed to its queue | ignored, a `changedAfterStart` diagnostic |
/// | result released without a terminal event | `resultAbandoned` |
/// | a command with no work | `missingRun` |
/// | throwing `map` / `reduce` | the node fails with the thrown error |
/// | a `RunLoop` nobody runs | nothing delivered, nothing lost: the events wait; cancel still ends the command |
/// | `executeQueue` replaced while running | ignored for this run, a `changedAfterStart` diagnostic |
/// | `removeDependency` after execute | ignored, a `changedAfterStart` diagnostic |
/// | a released callback object | nothing delivered to it, the run goes on |
/// | `retry` with a negative count | `invalidArgument` |
/// | a zero or negative `timeout` | `invalidArgument` |
/// | `MutuallyExclusive(category: "")` | a diagnostic when added; the command ends cancelled (`conditionFailed`, underlying `invalidArgument`) |
/// | `add(condition:)` or `inject(from:)` once a queue of yours holds the command | ignored, a `changedAfterStart` diagnostic |
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

    /// After a cancel, late sends and terminal events are the normal race: silent. After a real
    /// terminal event, each later one is diagnosed.
    @Test func lateEvents_afterACancel_areSilent_afterCompletion_areDiagnosed() async {
        for cancel in [true, false] {
            let sink = Locked<CommandResult<Int>?>(nil)
            let started = Checkpoint()
            let command = Command<Int> { result in
                sink.withLock { $0 = result }
                started.fulfill()
                return nil
            }
            command.name = cancel ? "cancelled" : "completed"
            let probe = DiagnosticsProbe(for: command)
            let recorder = Recorder<Int>()
            command.execute(on: .immediate, recorder.handler)
            #expect(await started.wait())
            let result = sink.withLock { $0 }
            if cancel { command.cancel() } else { result?.complete() }
            #expect(await recorder.waitForTerminal())
            result?.send(1)
            result?.complete()
            result?.succeed(2)
            result?.fail(CommandError.cancelled("x"))
            sink.withLock { $0 = nil }
            let reported = probe.diagnostics.filter { $0.code == .alreadyFinished }
            #expect(reported.count == (cancel ? 0 : 4), "\(command.name ?? ""): \(reported)")
        }
    }

    /// `dependencyPolicy` set once the command was handed to its queue: ignored with a diagnostic, and
    /// the dependencies ending later change nothing (no trap).
    @Test func dependencyPolicy_setLate_isIgnoredWithADiagnostic_andNothingTraps() async {
        let release = Checkpoint()
        let slow = Command<Int> { result in
            Task {
                _ = await release.wait()
                result.succeed(0)
            }
            return nil
        }
        let fast = named("fast")
        let dependent = named("dependent")
        dependent.dependencyPolicy = .runOnFirstSuccess
        dependent.addDependency(fast)
        dependent.addDependency(slow)
        let probe = DiagnosticsProbe(for: dependent)
        let recorder = Recorder<Int>()
        dependent.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        dependent.dependencyPolicy = .cancelIfAnyFails
        #expect(dependent.dependencyPolicy == .runOnFirstSuccess)
        release.fulfill()
        #expect(await terminalState(of: slow).isCompletedState)
        #expect(probe.diagnostics.contains { $0.message.contains("dependencyPolicy") && $0.code == .changedAfterStart })
    }

    /// An edge to a newer command closing a cycle: recorded as well (the same rule both ways), and
    /// executing names the cycle; its dependents do not run.
    @Test func cycle_closedByAnEdgeToANewerCommand_isFoundWhenExecuted_andNamedInOrder() async {
        let log = Log()
        let parse = named("parse", log)
        let fetch = named("fetch", log)
        let save = named("save", log)
        fetch.addDependency(parse)
        parse.addDependency(fetch)  // closes parse -> fetch -> parse: recorded, as Foundation does
        save.addDependency(fetch)
        #expect(parse.dependencies.count == 1)
        let recorder = Recorder<Int>()
        parse.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        let error = recorder.terminal?.error as? CommandError
        #expect(error?.code == .dependencyCycle)
        #expect(error?.cycle == ["parse", "fetch", "parse"])
        #expect(error?.message.contains("parse -> fetch -> parse") == true)
        // Its dependents do not run: the usual rule.
        let saved = Recorder<Int>()
        save.execute(on: .immediate, saved.handler)
        #expect(await saved.waitForTerminal())
        #expect(saved.terminal?.commandError?.code == .dependencyFailed)
        #expect(log.all.isEmpty)
    }

    /// `addDependency` records an edge that closes a cycle (Foundation's rule: a cancel may break it
    /// in a queue); executing the graph names the cycle and fails its commands with it.
    @Test func cycle_closedWithAddDependency_isFoundWhenExecuted_andNamedInOrder() async {
        let log = Log()
        let fetch = named("fetch", log)
        let parse = named("parse", log)
        fetch.addDependency(parse)
        parse.addDependency(fetch)  // closes the cycle: recorded, as Foundation records it
        #expect(parse.dependencies.count == 1)
        let recorder = Recorder<Int>()
        fetch.execute(on: .immediate, recorder.handler)
        #expect(await recorder.waitForTerminal())
        let error = recorder.terminal?.error as? CommandError
        #expect(error?.code == .dependencyCycle)
        #expect(error?.cycle == ["fetch", "parse", "fetch"])
        guard case .failed(let parseError as CommandError) = parse.state else { Issue.record("\(parse.state)"); return }
        #expect(parseError.code == .dependencyCycle)
        #expect(log.all.isEmpty)
    }

    @Test func dependOn_throwsTheNamedCycle_andLeavesTheGraphAsItWas() throws {
        let commands = (0..<5).map { named("c\($0)") }
        for index in 1..<5 { try commands[index].depend(on: commands[index - 1]) }
        do {
            try commands[0].depend(on: commands[4])
            Issue.record("no error")
        } catch let error as CommandError {
            #expect(error.code == .dependencyCycle)
            #expect(error.cycle == ["c0", "c4", "c3", "c2", "c1", "c0"])
        }
        #expect(commands[0].dependencies.isEmpty)
        #expect(throws: CommandError.self) { try commands[2].depend(on: commands[2]) }
    }

    @Test func cycleCheck_staysLinear_whenEdgesPointToOlderCommands() {
        // 20,000 edges added in creation order: each check is O(1) (no search), so this is quick; a
        // full search per edge would be 200 million steps.
        let commands = (0..<20_000).map { _ in Command<Int> { _ in nil } }
        for index in 1..<commands.count { commands[index].addDependency(commands[index - 1]) }
        #expect(commands.last?.dependencies.count == 1)
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

extension MisuseTests {
    private struct Boom: Error {}

    @Test func runLoopNobodyRuns_holdsTheEvents_theCommandStillEnds() async {
        // A thread's run loop that is never run: callbacks scheduled on it wait (documented), the
        // command itself still ends, and nothing crashes.
        let idle = Checkpoint()
        let loopBox = Locked<RunLoop?>(nil)
        let thread = Thread {
            loopBox.withLock { $0 = RunLoop.current }
            idle.fulfill()
        }
        thread.start()
        #expect(await idle.wait())
        guard let loop = loopBox.withLock({ $0 }) else { Issue.record("no run loop"); return }
        let delivered = Locked(0)
        let command = named("waiting")
        let ended = Checkpoint()
        command.observeState(on: .immediate) { state in if state.isTerminal { ended.fulfill() } }
        command.execute(on: .runLoop(loop)) { _ in delivered.withLock { $0 += 1 } }
        #expect(await ended.wait())
        #expect(command.state.isTerminal)
        #expect(delivered.withLock { $0 } == 0)
        #expect(command.observerCount == 1)  // the events wait for the loop, not lost
    }

    @Test func emptyCategory_isDiagnosed_andTheCommandDoesNotRun() async {
        let log = Log()
        let command = named("empty category", log)
        let probe = DiagnosticsProbe(for: command)
        command.add(condition: MutuallyExclusive(category: ""))
        #expect(probe.diagnostics.map(\.code) == [.invalidArgument])
        #expect(probe.diagnostics.first?.message.contains("category is empty") == true)
        let state = await terminalState(of: command, start: true)
        guard case .cancelled(let error) = state else {
            Issue.record("expected cancelled, got \(state)")
            return
        }
        #expect(error.code == .conditionFailed)
        #expect(error.command == "empty category")
        #expect((error.underlying as? CommandError)?.code == .invalidArgument)
        #expect(log.all.isEmpty)
    }

    /// A command handed to a suspended queue of the user's: a condition added then is ignored (the
    /// queue may count it ready already), with a diagnostic; the command runs when the queue resumes.
    @Test func conditionAdded_afterASuspendedQueueTookTheCommand_isIgnoredWithADiagnostic() async {
        let log = Log()
        let command = named("queued", log)
        let probe = DiagnosticsProbe(for: command)
        let queue = OperationQueue()
        queue.isSuspended = true
        queue.addOperation(command)
        command.add(condition: BlockCondition(name: "never") { false })
        #expect(command.conditions.isEmpty)
        #expect(probe.diagnostics.map(\.code) == [.changedAfterStart])
        #expect(probe.diagnostics.first?.message.contains("added to a queue") == true)
        let ended = Checkpoint()
        command.observeState(on: .immediate) { state in if state.isTerminal { ended.fulfill() } }
        queue.isSuspended = false
        #expect(await ended.wait())
        #expect(log.all == ["queued"])
    }
}
