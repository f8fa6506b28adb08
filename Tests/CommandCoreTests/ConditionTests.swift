import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

private struct TestError: Error, Equatable {}

/// A condition with a fixed answer (ProcedureKit's `TrueCondition` / `FalseCondition`).
private struct Fixed: CommandCondition {
    let answer: Bool
    var name: String { answer ? "TrueCondition" : "FalseCondition" }
    func evaluate(for command: Operation) async throws -> Bool { answer }
}

/// A condition that waits until `gate` is opened, then answers `answer`; records its cancellation.
private final class Slow: CommandCondition, Sendable {
    let answer: Bool
    let started = Checkpoint()
    let sawCancellation = Checkpoint()
    private let release = AsyncGate()
    init(answer: Bool) { self.answer = answer }
    var name: String { "Slow" }
    func open() { release.open() }
    func evaluate(for command: Operation) async throws -> Bool {
        started.fulfill()
        await withTaskCancellationHandler {
            await release.wait()
        } onCancel: {
            sawCancellation.fulfill()
        }
        return answer
    }
}

/// A gate a task awaits without blocking a thread; `open()` (or a cancelled waiter) lets it through.
private final class AsyncGate: Sendable {
    private let state = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.open { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            open()
        }
    }
}

/// A condition whose dependency is `dependency`, evaluated by `evaluate`.
private struct WithDependency: CommandCondition {
    let dependency: Operation
    let body: @Sendable () -> Bool
    var name: String { "WithDependency" }
    func dependency(for command: Operation) -> Operation? { dependency }
    func evaluate(for command: Operation) async throws -> Bool { body() }
}

/// A command that logs its run to `log` and succeeds.
private func logging(_ name: String, _ log: Log) -> Command<Int> {
    let command = Command<Int> { result in
        log.append(name)
        result.succeed(1)
        return nil
    }
    command.name = name
    return command
}

/// A command whose run keeps its result and never ends by itself (until cancelled); `started` is
/// fulfilled when it runs.
private func hanging(_ name: String) -> (command: Command<Void>, started: Checkpoint) {
    let kept = Locked<CommandResult<Void>?>(nil)
    let started = Checkpoint()
    let command = Command<Void> { result in
        kept.withLock { $0 = result }
        started.fulfill()
        return BlockCancelable { kept.withLock { $0 = nil } }
    }
    command.name = name
    return (command, started)
}

private func executed<Output>(_ command: Command<Output>) async -> CommandState {
    await withCheckedContinuation { continuation in
        let once = OnceToken()
        command.observeState(on: .immediate) { state in
            if state.isTerminal, once.take() { continuation.resume(returning: state) }
        }
        command.execute(on: .immediate) { _ in }
    }
}

extension CommandState {
    fileprivate var commandError: CommandError? {
        switch self {
        case .cancelled(let error): return error
        case .failed(let error): return error as? CommandError
        default: return nil
        }
    }
    fileprivate var isCompleted: Bool {
        if case .completed = self { return true }
        return false
    }
    fileprivate var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }
}

/// ProcedureKit's `ConditionTests`, `BlockConditionTests`, `NegatedConditionTests`,
/// `SilentConditionTests` and `NoFailedDependenciesConditionTests`, ported (behaviour kept, API
/// translated: a procedure is a command, `addCondition` is `add(condition:)`, a failed condition
/// ends the command cancelled with `conditionFailed`). Cases about ProcedureKit's own types
/// (`ComposedCondition`, `AndCondition`, `OrCondition`, `IgnoredCondition`, condition equality, its
/// dependency-requirement options, `ProcedureQueue` delegates) are not ported: this library has no
/// such types.
@Suite struct ConditionTests {
    // MARK: - ConditionTests

    @Test func condition_name_andCategories() {
        #expect(Fixed(answer: true).name == "TrueCondition")
        #expect(BlockCondition(name: "signed in") { true }.name == "signed in")
        #expect(MutuallyExclusive(category: "alert").mutuallyExclusiveCategories == ["alert"])
        #expect(Fixed(answer: true).mutuallyExclusiveCategories.isEmpty)
        #expect(Fixed(answer: true).dependency(for: Command<Int>()) == nil)
    }

    @Test func singleCondition_satisfied_runs() async {
        let log = Log()
        let command = logging("work", log)
        command.add(condition: Fixed(answer: true))
        #expect(await executed(command).isCompleted)
        #expect(log.all == ["work"])
    }

    @Test func singleCondition_failed_cancelsWithoutRunning_namingCommandAndCondition() async {
        let log = Log()
        let command = logging("work", log)
        command.add(condition: Fixed(answer: false))
        let state = await executed(command)
        #expect(state.isCancelled)
        #expect(state.commandError?.code == .conditionFailed)
        #expect(state.commandError?.command == "work")
        #expect(state.commandError?.condition == "FalseCondition")
        #expect(state.commandError?.message.contains("'FalseCondition'") == true)
        #expect(log.all.isEmpty)
    }

    @Test func multipleConditions_allSatisfied_runs() async {
        let log = Log()
        let command = logging("work", log)
        for _ in 0..<3 { command.add(condition: Fixed(answer: true)) }
        #expect(await executed(command).isCompleted)
        #expect(log.all == ["work"])
    }

    @Test func multipleConditions_allFail_orOneFails_cancel() async {
        for answers in [[false, false, false], [true, false, true]] {
            let log = Log()
            let command = logging("work", log)
            for answer in answers { command.add(condition: Fixed(answer: answer)) }
            let state = await executed(command)
            #expect(state.commandError?.code == .conditionFailed)
            #expect(log.all.isEmpty)
        }
    }

    /// A false condition does not wait for a slow one, whose evaluation and dependency are cancelled.
    @Test func slowConditionWithDependency_isCancelled_whenAnotherDecides() async {
        let log = Log()
        let command = logging("work", log)
        let slow = Slow(answer: true)
        let (slowDependency, dependencyStarted) = hanging("slow dependency")
        command.add(condition: slow)
        command.add(condition: WithDependency(dependency: slowDependency) { true })
        // Decides once the slow condition is evaluating and its dependency running: both are then
        // cancelled by the decision (deciding earlier could cancel the dependency before it ran, and
        // nothing would be left to check: a race a sanitizer's slow schedule can hit).
        let failing = BlockCondition(name: "late false") {
            _ = await slow.started.wait()
            _ = await dependencyStarted.wait()
            return false
        }
        command.add(condition: failing)
        let state = await executed(command)
        #expect(state.commandError?.condition == "late false")
        #expect(await slow.sawCancellation.wait())
        #expect(await dependencyStarted.wait())
        let dependencyState = await terminalState(of: slowDependency)
        #expect(dependencyState.isCancelled, "\(dependencyState)")
        #expect(log.all.isEmpty)
    }

    /// The condition's dependency failed: the condition is still evaluated (it reads what the
    /// dependency left behind).
    @Test func conditionDependencyFails_conditionStillEvaluates() async {
        let log = Log()
        let command = logging("work", log)
        let dependency = Command<Void> { result in result.fail(TestError()) }
        let evaluated = Locked(false)
        command.add(
            condition: WithDependency(dependency: dependency) {
                evaluated.withLock { $0 = true }
                return true
            })
        #expect(await executed(command).isCompleted)
        #expect(evaluated.withLock { $0 })
        #expect(log.all == ["work"])
    }

    /// The command's own dependencies run before its conditions' dependencies.
    @Test func dependencies_runBeforeConditionDependencies() async {
        let log = Log()
        let command = logging("work", log)
        let own = logging("own dependency", log)
        command.addDependency(own)
        let conditionDependency = logging("condition dependency", log)
        command.add(condition: WithDependency(dependency: conditionDependency) { true })
        #expect(await executed(command).isCompleted)
        #expect(log.all == ["own dependency", "condition dependency", "work"])
    }

    /// The command and its condition share a dependency: it runs once, before both.
    @Test func commandAndCondition_shareADependency() async {
        let log = Log()
        let command = logging("work", log)
        let shared = logging("shared", log)
        command.addDependency(shared)
        command.add(condition: WithDependency(dependency: shared) { true })
        #expect(await executed(command).isCompleted)
        #expect(log.all == ["shared", "work"])
    }

    /// A plain `Operation` as a condition's dependency is run (on an engine queue) before evaluate.
    @Test func plainOperationDependency_runsBeforeEvaluate() async {
        let log = Log()
        let command = logging("work", log)
        let plain = BlockOperation { log.append("plain") }
        command.add(condition: WithDependency(dependency: plain) { log.all == ["plain"] })
        #expect(await executed(command).isCompleted)
        #expect(log.all == ["plain", "work"])
    }

    /// Cancelled while a condition blocks: the command ends at once (it does not wait for the
    /// condition), the condition's task and dependency are cancelled, and the command never runs.
    @Test func cancelledWhileConditionsEvaluate_endsAtOnce_andCancelsTheirWork() async {
        let log = Log()
        let command = logging("work", log)
        let slow = Slow(answer: true)
        let (dependency, dependencyStarted) = hanging("dependency")
        command.add(condition: slow)
        command.add(condition: WithDependency(dependency: dependency) { true })
        let ended = Checkpoint()
        command.observeState(on: .immediate) { if $0.isTerminal { ended.fulfill() } }
        command.execute(on: .immediate) { _ in }
        #expect(await slow.started.wait())
        #expect(await dependencyStarted.wait())
        command.cancel()
        #expect(await ended.wait())
        #expect(command.state.isCancelled)
        #expect(command.state.commandError?.code == .cancelled)
        #expect(await slow.sawCancellation.wait())
        #expect(await terminalState(of: dependency).isCancelled)
        slow.open()
        #expect(log.all.isEmpty)
    }

    /// In a suspended queue of yours, conditions are not evaluated (the queue asks `isReady`, but the
    /// dependencies... here none: the gate opens; the command still does not run until resumed).
    @Test func suspendedUserQueue_commandRunsOnlyAfterResume() async {
        let log = Log()
        let command = logging("work", log)
        let evaluated = Checkpoint()
        command.add(
            condition: BlockCondition(name: "checked") {
                evaluated.fulfill()
                return true
            })
        let queue = OperationQueue()
        queue.isSuspended = true
        let ended = Checkpoint()
        command.observeState(on: .immediate) { if $0.isTerminal { ended.fulfill() } }
        queue.addOperation(command)
        #expect(await evaluated.wait())
        #expect(log.all.isEmpty)
        queue.isSuspended = false
        #expect(await ended.wait())
        #expect(log.all == ["work"])
    }

    // MARK: - BlockConditionTests

    @Test func blockCondition_true_runs_false_cancels_throw_cancelsWithTheError() async {
        let ok = logging("ok", Log())
        ok.add(condition: BlockCondition { true })
        #expect(await executed(ok).isCompleted)

        let refused = logging("refused", Log())
        refused.add(condition: BlockCondition { false })
        let refusal = await executed(refused)
        #expect(refusal.commandError?.code == .conditionFailed)
        #expect(refusal.commandError?.underlying == nil)

        let throwing = logging("throwing", Log())
        throwing.add(condition: BlockCondition(name: "throws") { throw TestError() })
        let thrown = await executed(throwing)
        #expect(thrown.isCancelled)
        #expect(thrown.commandError?.code == .conditionFailed)
        #expect(thrown.commandError?.underlying as? TestError == TestError())
        #expect(thrown.commandError?.condition == "throws")
    }

    @Test func blockCondition_async() async {
        let command = logging("async", Log())
        command.add(
            condition: BlockCondition(name: "signed in") {
                try await Task.sleep(nanoseconds: 1_000)
                return true
            })
        #expect(await executed(command).isCompleted)
    }

    // MARK: - NegatedConditionTests

    @Test func negated_inverts_andNamesTheInnerCondition() async {
        let negatedTrue = logging("a", Log())
        negatedTrue.add(condition: NegatedCondition(Fixed(answer: true)))
        let state = await executed(negatedTrue)
        #expect(state.commandError?.code == .conditionFailed)
        #expect(state.commandError?.condition == "Not<TrueCondition>")

        let negatedFalse = logging("b", Log())
        negatedFalse.add(condition: NegatedCondition(Fixed(answer: false)))
        #expect(await executed(negatedFalse).isCompleted)

        #expect(NegatedCondition(Fixed(answer: false)).name == "Not<FalseCondition>")
        #expect(NegatedCondition(MutuallyExclusive(category: "x")).mutuallyExclusiveCategories == ["x"])
    }

    // MARK: - SilentConditionTests

    @Test func silent_namesItself_andDoesNotRunTheDependency() async {
        #expect(SilentCondition(Fixed(answer: false)).name == "Silent<FalseCondition>")
        let log = Log()
        let dependency = logging("dependency", log)
        let condition = WithDependency(dependency: dependency) { true }
        #expect(SilentCondition(condition).dependency(for: Command<Int>()) == nil)
        let command = logging("work", log)
        command.add(condition: SilentCondition(condition))
        #expect(await executed(command).isCompleted)
        #expect(log.all == ["work"])
        #expect(dependency.timing.executedAt == nil)
    }

    // MARK: - NoFailedDependenciesConditionTests (this library: `dependencyPolicy`)

    /// ProcedureKit's `NoFailedDependenciesCondition` is this library's default policy,
    /// `.cancelIfAnyFails`; its `ignoreCancellations` has no counterpart (a cancelled dependency
    /// cancels the dependent too), `.runRegardless` runs whatever the dependencies did.
    @Test func failedOrCancelledDependency_cancelsTheCommand_conditionsNotEvaluated() async {
        let evaluated = Locked(0)
        let condition = BlockCondition(name: "counted") {
            evaluated.withLock { $0 += 1 }
            return true
        }
        let noDependencies = logging("none", Log())
        noDependencies.add(condition: condition)
        #expect(await executed(noDependencies).isCompleted)

        let succeeded = logging("after success", Log())
        succeeded.addDependency(logging("ok", Log()))
        succeeded.add(condition: condition)
        #expect(await executed(succeeded).isCompleted)

        let failing = Command<Int> { result in result.fail(TestError()) }
        let afterFailure = logging("after failure", Log())
        afterFailure.addDependency(failing)
        afterFailure.add(condition: condition)
        #expect(await executed(afterFailure).commandError?.code == .dependencyFailed)

        let cancelled = Command<Int> { _ in }
        cancelled.cancel()
        let afterCancel = logging("after cancel", Log())
        afterCancel.addDependency(cancelled)
        afterCancel.addDependency(logging("ok too", Log()))
        afterCancel.add(condition: condition)
        #expect(await executed(afterCancel).commandError?.code == .dependencyCancelled)

        // Conditions ran for the two commands whose dependencies succeeded, not for the others.
        #expect(evaluated.withLock { $0 } == 2)
    }

    // MARK: - This library's own rules

    @Test func conditionAddedAfterTheCheckBegan_isIgnoredWithADiagnostic() async {
        let command = logging("late", Log())
        #expect(await executed(command).isCompleted)
        let diagnosed = Checkpoint()
        let token = CommandDiagnostics.observe { diagnostic in
            if diagnostic.command == "late", diagnostic.message.contains("add(condition:") { diagnosed.fulfill() }
        }
        command.add(condition: Fixed(answer: false))
        #expect(await diagnosed.wait())
        #expect(command.conditions.isEmpty)
        token.cancel()
    }

    /// In a serial queue of yours, a command whose condition waits does not hold the queue: an
    /// operation added after it runs meanwhile, and the command runs once its condition passed.
    @Test func serialUserQueue_waitingCondition_doesNotHoldTheQueue() async {
        let log = Log()
        let command = logging("gated", log)
        let slow = Slow(answer: true)
        command.add(condition: slow)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let ended = Checkpoint()
        command.observeState(on: .immediate) { if $0.isTerminal { ended.fulfill() } }
        queue.addOperation(command)
        #expect(await slow.started.wait())
        #expect(!command.isReady)
        let other = Checkpoint()
        queue.addOperation {
            log.append("other"); other.fulfill()
        }
        #expect(await other.wait())
        slow.open()
        #expect(await ended.wait())
        #expect(log.all == ["other", "gated"])
    }

    // MARK: - Compound conditions (ProcedureKit's AndConditionTests / OrConditionTests, the cases
    // that apply: no `IgnoredCondition` yet, and no condition results other than true / false /
    // thrown)

    @Test func and_allTrue_runs_oneFalse_cancelsNamingThatPart() async {
        let ok = logging("ok", Log())
        ok.add(condition: AndCondition(Fixed(answer: true), Fixed(answer: true)))
        #expect(await executed(ok).isCompleted)

        let log = Log()
        let refused = logging("refused", log)
        refused.add(
            condition: AndCondition(Fixed(answer: true), Fixed(answer: false), BlockCondition(name: "b") { true }))
        let state = await executed(refused)
        #expect(state.isCancelled)
        #expect(state.commandError?.code == .conditionFailed)
        #expect(state.commandError?.condition == "And<TrueCondition, FalseCondition, b>")
        let failure = state.commandError?.underlying as? CompoundConditionFailure
        #expect(failure?.failedParts == ["FalseCondition"])
        #expect(log.all.isEmpty)

        let throwing = logging("throwing", Log())
        throwing.add(condition: AndCondition(BlockCondition(name: "throws") { throw TestError() }))
        let thrown = await executed(throwing)
        let thrownFailure = thrown.commandError?.underlying as? CompoundConditionFailure
        #expect(thrownFailure?.failedParts == ["throws"])
        #expect(thrownFailure?.errors.compactMap { $0 }.first is TestError)
    }

    @Test func or_anyTrue_runs_noneTrue_cancelsListingEveryPart() async {
        let ok = logging("ok", Log())
        ok.add(
            condition: OrCondition(
                Fixed(answer: false), BlockCondition(name: "throws") { throw TestError() }, Fixed(answer: true)))
        #expect(await executed(ok).isCompleted)

        let refused = logging("refused", Log())
        refused.add(condition: OrCondition(Fixed(answer: false), Fixed(answer: false)))
        let state = await executed(refused)
        #expect(state.isCancelled)
        let failure = state.commandError?.underlying as? CompoundConditionFailure
        #expect(failure?.failedParts == ["FalseCondition", "FalseCondition"])
        #expect(failure?.condition == "Or<FalseCondition, FalseCondition>")

        let empty = logging("empty", Log())
        empty.add(condition: OrCondition([]))
        #expect(await executed(empty).isCancelled)
    }

    /// The parts' dependencies all run before the compound condition evaluates; categories are the
    /// union of the parts'.
    @Test func compound_runsEveryPartsDependency_andUnitesCategories() async {
        let log = Log()
        let command = logging("work", log)
        let first = logging("first dependency", log)
        let second = BlockOperation { log.append("second dependency") }
        let condition = AndCondition(
            WithDependency(dependency: first) { log.all.contains("first dependency") },
            OrCondition(
                WithDependency(dependency: second) { log.all.contains("second dependency") },
                MutuallyExclusive(category: "compound-\(UUID().uuidString)")))
        #expect(condition.mutuallyExclusiveCategories.count == 1)
        command.add(condition: condition)
        #expect(await executed(command).isCompleted)
        #expect(log.all.last == "work")
        #expect(Set(log.all.dropLast()) == ["first dependency", "second dependency"])
    }

    /// `BlockCondition(name:dependency:)`: a fresh dependency per command, run before the block.
    @Test func blockCondition_withADependency_runsAFreshOnePerCommand_beforeTheBlock() async {
        let log = Log()
        let signedIn = Locked(false)
        let condition = BlockCondition(
            name: "signed in",
            dependency: {
                Command<Void> { result in
                    log.append("sign in")
                    signedIn.withLock { $0 = true }
                    result.succeed()
                    return nil
                }
            }
        ) { signedIn.withLock { $0 } }
        let first = logging("first", log)
        first.add(condition: condition)
        #expect(await executed(first).isCompleted)
        signedIn.withLock { $0 = false }
        let second = logging("second", log)
        second.add(condition: condition)
        #expect(await executed(second).isCompleted)
        #expect(log.all == ["sign in", "first", "sign in", "second"])
    }

    // MARK: - IgnoredCondition (ProcedureKit's IgnoredConditionTests)

    /// False or throwing: the command completes without running and without a value, and its
    /// dependents run; true: it runs.
    @Test func ignored_false_orThrowing_completesWithoutRunning_andDependentsRun() async {
        for inner in [Fixed(answer: false), BlockCondition(name: "throws") { throw TestError() }]
            as [any CommandCondition]
        {
            let log = Log()
            let skipped = logging("skipped", log)
            skipped.add(condition: IgnoredCondition(AnyCondition(inner)))
            let dependent = logging("dependent", log)
            dependent.addDependency(skipped)
            #expect(await executed(dependent).isCompleted)
            #expect(skipped.state.isCompleted)
            #expect(log.all == ["dependent"], "the ignored command did not run, its dependent did")
            let values = Locked<[Int]>([])
            skipped.observe(on: .immediate) { event in
                if let value = event.value { values.withLock { $0.append(value) } }
            }
            #expect(values.withLock { $0 }.isEmpty, "no value")
        }
        let ran = logging("ran", Log())
        ran.add(condition: IgnoredCondition(Fixed(answer: true)))
        #expect(await executed(ran).isCompleted)
        #expect(IgnoredCondition(Fixed(answer: true)).name == "Ignored<TrueCondition>")
    }

    /// Its dependency and categories are the inner condition's; a failing condition beside it still
    /// cancels when it is the first to answer false.
    @Test func ignored_keepsTheInnerDependencyAndCategories() async {
        let log = Log()
        let dependency = logging("inner dependency", log)
        let category = "ignored-\(UUID().uuidString)"
        let inner = AndCondition(
            WithDependency(dependency: dependency) { false }, MutuallyExclusive(category: category))
        let condition = IgnoredCondition(inner)
        #expect(condition.mutuallyExclusiveCategories == [category])
        let command = logging("work", log)
        command.add(condition: condition)
        #expect(await executed(command).isCompleted)
        #expect(log.all == ["inner dependency"])
    }

    /// Inside an `AndCondition`, a false ignored part completes the command; an `OrCondition` tries
    /// the next part, and completes the command only if every part was false.
    @Test func ignored_insideCompounds() async {
        let andLog = Log()
        let and = logging("and", andLog)
        and.add(condition: AndCondition(Fixed(answer: true), IgnoredCondition(Fixed(answer: false))))
        #expect(await executed(and).isCompleted && andLog.all.isEmpty)

        let orLog = Log()
        let or = logging("or", orLog)
        or.add(condition: OrCondition(IgnoredCondition(Fixed(answer: false)), Fixed(answer: true)))
        #expect(await executed(or).isCompleted)
        #expect(orLog.all == ["or"], "the true part let it run")

        let noneLog = Log()
        let none = logging("none", noneLog)
        none.add(condition: OrCondition(Fixed(answer: false), IgnoredCondition(Fixed(answer: false))))
        #expect(await executed(none).isCompleted && noneLog.all.isEmpty)
    }
}

/// Erases a condition (for a list of mixed conditions).
private struct AnyCondition: CommandCondition {
    let base: any CommandCondition
    init(_ base: any CommandCondition) { self.base = base }
    var name: String { base.name }
    var mutuallyExclusiveCategories: Set<String> { base.mutuallyExclusiveCategories }
    func dependency(for command: Operation) -> Operation? { base.dependency(for: command) }
    func evaluate(for command: Operation) async throws -> Bool { try await base.evaluate(for: command) }
}
