import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

private struct TestError: Error {}

/// A shared log of steps.
private final class Steps: Sendable {
    private let entries = Locked<[String]>([])
    func append(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// A command that logs its run and succeeds (or fails) on another thread.
private func child(_ name: String, _ steps: Steps, fails: Bool = false) -> Command<Int> {
    let command = Command<Int> { result in
        steps.append(name)
        DispatchQueue.global().async {
            steps.append("\(name) ended")
            if fails { result.fail(TestError()) } else { result.succeed(1) }
        }
        return nil
    }
    command.name = name
    return command
}

/// A command that runs until the test releases it (its result kept), counting how many run at once.
private final class Held: Sendable {
    private let results = Locked<[String: CommandResult<Int>]>([:])
    private let running = Locked((now: 0, most: 0))
    let started: Checkpoint

    init(expected: Int) { started = Checkpoint(count: expected) }

    func command(_ name: String) -> Command<Int> {
        let command = Command<Int> { [self] result in
            running.withLock {
                $0.now += 1
                $0.most = max($0.most, $0.now)
            }
            results.withLock { $0[name] = result }
            started.fulfill()
            return BlockCancelable { [self] in
                running.withLock { $0.now -= 1 }
            }
        }
        command.name = name
        return command
    }

    func release(_ name: String) {
        running.withLock { $0.now -= 1 }
        results.withLock { $0.removeValue(forKey: name) }?.succeed(0)
    }

    var mostAtOnce: Int { running.withLock { $0.most } }
    var names: [String] { results.withLock { Array($0.keys) } }
}

private struct Ended {
    var events: [String] = []
    var outcome: Graph.Outcome?
    var error: CommandError?
}

/// Executes `group` and waits for its terminal event: its events, outcome value and error.
private func run(_ group: GroupCommand) async -> Ended {
    let ended = Locked(Ended())
    let done = Checkpoint()
    group.execute(on: .immediate) { event in
        ended.withLock { state in
            switch event {
            case .value(let outcome):
                state.events.append("value")
                state.outcome = outcome
            case .completed: state.events.append("completed")
            case .failed(let error):
                state.events.append("failed")
                state.error = error as? CommandError
            case .cancelled(let error):
                state.events.append("cancelled")
                state.error = error
            }
        }
        if event.isTerminal { done.fulfill() }
    }
    _ = await done.wait()
    return ended.withLock { $0 }
}

extension CommandState {
    fileprivate var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }
}

/// ProcedureKit's `GroupTests`, ported (a procedure is a command, `GroupProcedure` is `GroupCommand`,
/// `addChild` is `add(child:)`, `maxConcurrentOperationCount` is `maxConcurrentChildren`). Not ported,
/// for types or hooks this library does not have: will/did-add-child observers, suspending a group,
/// `transformChildErrorsBlock` and `child(_:willFinishWithErrors:)`, delegate calls from other
/// queues, `evaluateConditions` procedures.
@Suite struct GroupTests {
    @Test func children_areExecuted_thenValueAndCompleted() async {
        let steps = Steps()
        let children = (0..<3).map { child("c\($0)", steps) }
        let group = GroupCommand(name: "group", children: children)
        let ended = await run(group)
        #expect(ended.events == ["value", "completed"])
        #expect(ended.outcome?.completed.sorted() == ["c0", "c1", "c2"])
        #expect(children.allSatisfy { $0.isFinished })
    }

    @Test func childrenProperty_holdsEachInitialChildOnce() {
        let steps = Steps()
        let one = child("one", steps)
        let group = GroupCommand(children: [one, one, child("two", steps)])
        #expect(group.children.count == 2)
    }

    @Test func addingAChild_toARunningGroup_joinsTheRun() async {
        let steps = Steps()
        let group = GroupCommand(name: "group")
        let late = child("late", steps)
        let first = Command<Int> { result in
            steps.append("first")
            group.add(child: late)  // a child adds a sibling while the group runs
            result.succeed(1)
            return nil
        }
        first.name = "first"
        group.add(child: first)
        let ended = await run(group)
        #expect(ended.events == ["value", "completed"])
        #expect(Set(ended.outcome?.completed ?? []) == ["first", "late"])
        #expect(group.children.count == 2)
        #expect(steps.all.contains("late ended"))  // the group waited for the produced child
    }

    @Test func childFails_groupSendsTheOutcome_thenFailsNamingIt() async {
        let steps = Steps()
        let group = GroupCommand(name: "group", children: [child("ok", steps), child("bad", steps, fails: true)])
        let ended = await run(group)
        #expect(ended.events == ["value", "failed"])
        #expect(ended.error?.code == .childFailed)
        #expect(ended.error?.dependency == "bad")
        #expect(ended.error?.underlying is TestError)
        #expect(ended.outcome?.failed == ["bad"])
        #expect(ended.outcome?.completed == ["ok"])
    }

    @Test func childGroupFails_parentFailsNamingTheChildGroup() async {
        let steps = Steps()
        let inner = GroupCommand(name: "inner", children: [child("bad", steps, fails: true)])
        let outer = GroupCommand(name: "outer", children: [inner, child("ok", steps)])
        let ended = await run(outer)
        #expect(ended.events == ["value", "failed"])
        #expect(ended.error?.dependency == "inner")
        #expect(ended.outcome?.failed == ["inner"])
    }

    @Test func cancelSiblings_cancelsTheOthersAtTheFirstFailure() async {
        let held = Held(expected: 1)
        let waiting = held.command("waiting")
        let steps = Steps()
        let bad = Command<Int> { result in
            result.fail(TestError())
            return nil
        }
        bad.name = "bad"
        bad.addDependency(
            Command<Int> { result in
                _ = held.started  // the waiting child runs first
                result.succeed(0)
                return nil
            })
        let group = GroupCommand(name: "group", children: [waiting, bad, child("other", steps)])
        group.childFailurePolicy = .cancelSiblings
        let ended = await run(group)
        #expect(ended.events == ["value", "failed"])
        #expect(ended.outcome?.failed == ["bad"])
        #expect(ended.outcome?.cancelled.contains("waiting") == true)
    }

    @Test func cancelledChildrenAlone_completeTheGroup() async {
        let steps = Steps()
        let cancelled = child("cancelled", steps)
        cancelled.cancel()
        let group = GroupCommand(name: "group", children: [cancelled, child("ok", steps)])
        let ended = await run(group)
        #expect(ended.events == ["value", "completed"])
        #expect(ended.outcome?.cancelled == ["cancelled"])
        #expect(ended.outcome?.completed == ["ok"])
    }

    @Test func cancellingTheGroupBeforeItRuns_cancelsItsChildren() async {
        let steps = Steps()
        let children = (0..<3).map { child("c\($0)", steps) }
        let group = GroupCommand(children: children)
        group.cancel()
        for child in children {
            #expect(await terminalState(of: child).isCancelled)
        }
        #expect(steps.all.isEmpty)
    }

    @Test func cancellingARunningGroup_cancelsEveryChild_once_andLaterChildren() async {
        let held = Held(expected: 2)
        let a = held.command("a")
        let b = held.command("b")
        let group = GroupCommand(name: "group", children: [a, b])
        let endings = Locked(0)
        for command in [a, b] {
            command.observeState(on: .immediate) { if $0.isTerminal { endings.withLock { $0 += 1 } } }
        }
        let groupEnded = Checkpoint()
        group.execute(on: .immediate) { if $0.isTerminal { groupEnded.fulfill() } }
        #expect(await held.started.wait())
        group.cancel()
        #expect(await groupEnded.wait())
        #expect(await terminalState(of: a).isCancelled)
        #expect(await terminalState(of: b).isCancelled)
        let late = Command<Int> { result in
            result.succeed(1)
            return nil
        }
        group.add(child: late)
        #expect(await terminalState(of: late).isCancelled)
        #expect(endings.withLock { $0 } == 2)
    }

    @Test func groupDoesNotFinish_beforeEveryChildFinished() async {
        let held = Held(expected: 2)
        let group = GroupCommand(name: "group", children: [held.command("a"), held.command("b")])
        let ended = Checkpoint()
        group.execute(on: .immediate) { if $0.isTerminal { ended.fulfill() } }
        #expect(await held.started.wait())
        held.release("a")
        #expect(!ended.isFulfilled)
        #expect(group.isExecuting)
        held.release("b")
        #expect(await ended.wait())
    }

    /// Each child ends on another thread a moment after it started; the most that ran at once is
    /// counted by the children themselves (without the limit, all four start before any ends).
    @Test func maxConcurrentChildren_oneAndTwo() async {
        for limit in [1, 2] {
            let running = Locked((now: 0, most: 0))
            let children = (0..<4).map { index -> Command<Int> in
                let command = Command<Int> { result in
                    running.withLock {
                        $0.now += 1
                        $0.most = max($0.most, $0.now)
                    }
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) {
                        running.withLock { $0.now -= 1 }
                        result.succeed(index)
                    }
                    return nil
                }
                command.name = "c\(index)"
                return command
            }
            let group = GroupCommand(name: "group", children: children)
            group.maxConcurrentChildren = limit
            let ended = await run(group)
            #expect(ended.events == ["value", "completed"])
            #expect(running.withLock { $0.most } <= limit)
            #expect(running.withLock { $0.most } >= 1)
        }
    }

    @Test func childEdges_areHonoured() async {
        let steps = Steps()
        let first = child("first", steps)
        let second = child("second", steps)
        second.addDependency(first)
        let group = GroupCommand(name: "group", children: [second, first])
        group.maxConcurrentChildren = 1
        _ = await run(group)
        #expect(steps.all == ["first", "first ended", "second", "second ended"])
    }

    /// A group of one-at-a-time children that each end as they are executed (a `map` of a ready value
    /// runs in place): each end starts the next child on the same thread, so neither the in-place runs
    /// nor the group's watch of its children's ends may nest a level per child. 5,000 of them, the
    /// group executed on a 512 KiB thread (Apple's secondary threads): all complete.
    @Test func sequentialChildrenEndingInPlace_onASmallStack_allComplete() async {
        let children = (0..<5_000).map { index in Command.just(index).map { $0 + 1 } }
        let group = GroupCommand(name: "in place", children: children)
        group.maxConcurrentChildren = 1
        let ended = Checkpoint()
        let outcome = Locked<Graph.Outcome?>(nil)
        let thread = Thread {
            group.execute(on: .immediate) { event in
                if let value = event.value { outcome.withLock { $0 = value } }
                if event.isTerminal { ended.fulfill() }
            }
        }
        thread.stackSize = 512 * 1024
        thread.start()
        #expect(await ended.wait(seconds: 120))
        #expect(outcome.withLock { $0?.completed.count } == 5_000)
        #expect(children.allSatisfy { $0.state.isTerminal })
    }

    @Test func emptyGroup_completesAtOnce() async {
        let ended = await run(GroupCommand(name: "empty"))
        #expect(ended.events == ["value", "completed"])
        #expect(ended.outcome?.completed.isEmpty == true)
    }

    @Test func groupAndChildInOneCategory_neverDeadlock_siblingsStayExclusive() async {
        // Categories are process-wide and tests run in parallel: this one is the test's own.
        let file = "file-\(UUID().uuidString)"
        let running = Locked((now: 0, most: 0))
        func exclusiveChild(_ name: String) -> Command<Int> {
            let command = Command<Int> { result in
                running.withLock {
                    $0.now += 1
                    $0.most = max($0.most, $0.now)
                }
                DispatchQueue.global().async {
                    running.withLock { $0.now -= 1 }
                    result.succeed(1)
                }
                return nil
            }
            command.name = name
            command.add(condition: MutuallyExclusive(category: file))
            return command
        }
        let inner = GroupCommand(name: "inner", children: (0..<3).map { exclusiveChild("i\($0)") })
        inner.add(condition: MutuallyExclusive(category: file))
        let outer = GroupCommand(name: "outer", children: [inner] + (0..<3).map { exclusiveChild("o\($0)") })
        outer.add(condition: MutuallyExclusive(category: file))
        let ended = await run(outer)
        #expect(ended.events == ["value", "completed"])
        #expect(running.withLock { $0.most } == 1)
    }

    @Test func groupInAUserQueue_runsThere_andItsDependentWaits() async {
        let steps = Steps()
        let group = GroupCommand(name: "group", children: [child("a", steps), child("b", steps)])
        let after = BlockOperation { steps.append("after") }
        after.addDependency(group)
        // The completion block before the operations are queued: set after, it could come too late
        // (the group and `after` had both finished before it was set in one ThreadSanitizer run, and
        // the wait timed out).
        let done = Checkpoint()
        after.completionBlock = { done.fulfill() }
        let queue = OperationQueue()
        queue.addOperation(after)
        queue.addOperation(group)
        #expect(await done.wait())
        #expect(steps.all.last == "after")
        #expect(steps.all.contains("a ended") && steps.all.contains("b ended"))
    }

    @Test func progress_countsChildren_andReportDrawsACluster() async {
        let steps = Steps()
        let group = GroupCommand(name: "login", children: [child("token", steps), child("profile", steps)])
        _ = await run(group)
        #expect(group.fractionCompleted == 1)
        let dot = GraphReport.dot(group)
        #expect(dot.contains("subgraph cluster_"))
        #expect(dot.contains("label=\"login\""))
        #expect(GraphReport.mermaid(group).contains("subgraph g"))
        #expect(GraphReport.chromeTrace(group).contains("(in a group)"))
    }

    /// A group makes no `Progress` per child until its own is asked for; asked after the run, it
    /// adopts the ended children (complete); asked before, it counts them as they end.
    @Test func progress_isAdoptedWhenAskedFor_beforeOrAfterTheRun() async {
        let steps = Steps()
        let late = [child("a", steps), child("b", steps)]
        let unasked = GroupCommand(name: "unasked", children: late)
        _ = await run(unasked)
        #expect(late.allSatisfy { !$0.hasProgress }, "no Progress per child while nobody asked")
        #expect(unasked.fractionCompleted == 1)
        #expect(late.allSatisfy { $0.hasProgress }, "adopted when the group's progress was made")

        let early = [child("c", steps), child("d", steps), child("e", steps)]
        let asked = GroupCommand(name: "asked", children: early)
        #expect(asked.fractionCompleted == 0)
        let ended = await run(asked)
        #expect(ended.outcome?.completed.count == 3)
        #expect(early.allSatisfy { $0.hasProgress && $0.fractionCompleted == 1 })
        #expect(asked.fractionCompleted == 1)
    }

    @Test func plainOperationChildren_run() async {
        let steps = Steps()
        let group = GroupCommand(
            name: "group", children: [BlockOperation { steps.append("plain") }, child("command", steps)])
        let ended = await run(group)
        #expect(ended.events == ["value", "completed"])
        #expect(steps.all.contains("plain"))
        #expect(ended.outcome?.completed.count == 2)
    }

    @Test func addAfterTheGroupEnded_isADiagnostic() async {
        let group = GroupCommand(name: "done")
        _ = await run(group)
        let diagnosed = Checkpoint()
        let token = CommandDiagnostics.observe { diagnostic in
            if diagnostic.command == "done", diagnostic.message.contains("after the group ended") {
                diagnosed.fulfill()
            }
        }
        group.add(child: Command<Int>())
        #expect(await diagnosed.wait())
        #expect(group.children.isEmpty)
        token.cancel()
    }

    /// A command in a graph and in two groups: no trap (a `Progress` has one parent: the first
    /// counts it), it runs once, and each of them finishes.
    @Test func commandInAGraphAndTwoGroups_runsOnce_neverTraps() async throws {
        let steps = Steps()
        let shared = child("shared", steps)
        let graph = Graph()
        try graph.add(shared)
        let first = GroupCommand(name: "first", children: [shared])
        let second = GroupCommand(name: "second", children: [shared, child("own", steps)])
        try graph.run(on: .immediate)
        let firstEnded = await run(first)
        let secondEnded = await run(second)
        _ = await graph.outcome
        #expect(firstEnded.outcome?.completed == ["shared"])
        #expect(secondEnded.outcome?.completed.sorted() == ["own", "shared"])
        #expect(steps.all.filter { $0 == "shared" }.count == 1)
        #expect(graph.fractionCompleted == 1)
        #expect(second.fractionCompleted == 1)
    }
}

/// Bad input to a group gets a diagnostic naming it, and changes nothing.
@Suite struct GroupMisuseTests {
    @Test(arguments: [0, -1, Int.min])
    func maxConcurrentChildren_belowOne_isIgnored_withADiagnostic(value: Int) {
        let group = GroupCommand(name: "limited")
        group.maxConcurrentChildren = 3
        let diagnostics = Locked<[CommandDiagnostic]>([])
        let token = CommandDiagnostics.observe { diagnostic in
            if diagnostic.commandID == ObjectIdentifier(group) { diagnostics.withLock { $0.append(diagnostic) } }
        }
        group.maxConcurrentChildren = value
        token.cancel()
        #expect(group.maxConcurrentChildren == 3)
        let seen = diagnostics.withLock { $0 }
        #expect(seen.map(\.code) == [.invalidArgument])
        #expect(seen.first?.command == "limited")
        #expect(seen.first?.message.contains("maxConcurrentChildren = \(value) is ignored") == true)
    }
}
