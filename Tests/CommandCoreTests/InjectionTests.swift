import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

private struct ParseError: Error, Equatable {}
private struct FetchError: Error {}

/// A command that reads what was injected into it when it runs (the issue's `Parse`).
private final class Parse: Command<String>, @unchecked Sendable {
    // Written by the injection before the command runs and read in `run`: the gate orders the two (the
    // injection happens before the command is handed to its queue).
    var data: String?
    let ran = Locked(0)

    override func run(_ result: CommandResult<String>) -> (any Cancelable)? {
        ran.withLock { $0 += 1 }
        guard let data else {
            result.fail(ParseError())
            return nil
        }
        result.succeed("parsed \(data)")
        return nil
    }
}

/// Sends `values` later, on another thread, then completes.
private func fetch(_ values: [String], name: String = "fetch") -> Command<String> {
    let command = Command<String> { result in
        DispatchQueue.global().async {
            for value in values { result.send(value) }
            result.complete()
        }
        return nil
    }
    command.name = name
    return command
}

/// A condition that is true when the `Parse` it checks already holds its data.
private struct HasData: CommandCondition {
    func evaluate(for command: Operation) async throws -> Bool { (command as? Parse)?.data != nil }
}

/// `inject(from:_:)`. Ported from ProcedureKit's `ResultInjectionTests` where they apply: the block runs,
/// a failed dependency cancels the receiver, a requirement not met (no value) cancels it, a cancelled
/// dependency cancels it, one input bound to two receivers, injection into a group (in
/// `GroupInjectionTests`). Not ported: the optional-unwrapping tests (a `nil` of an optional output
/// is a value here, handed over as is) and the collection `flatMap`/`reduce`/`gathered` helpers
/// (`zip`, `combineLatest` and `collect` do that here).
@Suite struct InjectionTests {
    @Test func theLastValue_reachesTheCommand_beforeItRuns() async throws {
        let source = fetch(["a", "b", "payload"])
        let parse = Parse()
        parse.inject(from: source) { parse, data in parse.data = data }
        #expect(try await parse.value == "parsed payload")
        #expect(parse.ran.withLock { $0 } == 1)
    }

    @Test func theBlockRuns_beforeTheConditionsEvaluate() async throws {
        let parse = Parse()
        parse.add(condition: HasData())
        parse.inject(from: fetch(["x"])) { parse, data in parse.data = data }
        #expect(try await parse.value == "parsed x")
    }

    @Test func aDependencyThatSendsNoValue_cancelsTheCommand_withNoValue_namingBoth() async {
        let parse = Parse()
        parse.name = "parse"
        let called = Locked(false)
        parse.inject(from: fetch([], name: "empty fetch")) { _, _ in called.withLock { $0 = true } }
        let state = await terminalState(of: parse, start: true)
        guard case .cancelled(let error) = state else { Issue.record("\(state)"); return }
        #expect(error.code == .noValue)
        #expect(error.command == "parse" && error.dependency == "empty fetch")
        #expect(error.message.contains("'parse'") && error.message.contains("'empty fetch'"))
        #expect(!called.withLock { $0 })
        #expect(parse.ran.withLock { $0 } == 0)
    }

    @Test func aFailedDependency_cancelsTheCommand_asAnyDependencyDoes() async {
        let failing = Command<String> { result in
            result.fail(FetchError())
            return nil
        }
        let parse = Parse()
        let called = Locked(false)
        parse.inject(from: failing) { _, _ in called.withLock { $0 = true } }
        let state = await terminalState(of: parse, start: true)
        guard case .cancelled(let error) = state else { Issue.record("\(state)"); return }
        #expect(error.code == .dependencyFailed)
        #expect(error.underlying is FetchError)
        #expect(!called.withLock { $0 } && parse.ran.withLock { $0 } == 0)
    }

    @Test func aFailedDependency_underRunRegardless_runsTheCommand_withoutTheBlock() async {
        let failing = Command<String> { result in
            result.fail(FetchError())
            return nil
        }
        let parse = Parse()
        parse.dependencyPolicy = .runRegardless
        let called = Locked(false)
        parse.inject(from: failing) { _, _ in called.withLock { $0 = true } }
        let state = await terminalState(of: parse, start: true)
        guard case .failed(let error) = state else { Issue.record("\(state)"); return }
        #expect(error is ParseError, "it ran without data")
        #expect(!called.withLock { $0 } && parse.ran.withLock { $0 } == 1)
    }

    @Test func aCancelledDependency_cancelsTheCommand() async {
        let source = fetch(["never"])
        let parse = Parse()
        parse.inject(from: source) { parse, data in parse.data = data }
        source.cancel()
        let state = await terminalState(of: parse, start: true)
        guard case .cancelled(let error) = state else { Issue.record("\(state)"); return }
        #expect(error.code == .dependencyCancelled)
        #expect(parse.ran.withLock { $0 } == 0)
    }

    @Test func aThrowingBlock_failsTheCommand_withThatError_withoutRunning() async {
        let parse = Parse()
        parse.inject(from: fetch(["bad"])) { _, _ in throw ParseError() }
        let state = await terminalState(of: parse, start: true)
        guard case .failed(let error) = state else { Issue.record("\(state)"); return }
        #expect(error as? ParseError == ParseError())
        #expect(parse.ran.withLock { $0 } == 0)
    }

    @Test func severalInjections_fromDifferentDependencies_allApply_inOrder() async throws {
        final class Join: Command<String>, @unchecked Sendable {
            // Written by the injections (one at a time, before the run) and read in `run`.
            var parts: [String] = []
            override func run(_ result: CommandResult<String>) -> (any Cancelable)? {
                result.succeed(parts.joined(separator: " "))
                return nil
            }
        }
        let join = Join()
        join.inject(from: fetch(["hello"], name: "first")) { join, part in join.parts.append(part) }
        join.inject(from: fetch(["world"], name: "second")) { join, part in join.parts.append(part) }
        #expect(try await join.value == "hello world")
        #expect(join.dependencies.count == 2)
    }

    /// ProcedureKit's `test__input_binding`: one dependency's value into two commands.
    @Test func oneDependency_intoTwoCommands() async throws {
        let source = fetch(["shared"])
        let first = Parse()
        let second = Parse()
        first.inject(from: source) { parse, data in parse.data = data }
        second.inject(from: source) { parse, data in parse.data = data + "!" }
        async let a = first.value
        async let b = second.value
        #expect(try await [a, b] == ["parsed shared", "parsed shared!"])
    }

    @Test func aDependencyThatKeepsNoValues_stillHandsOverItsLast() async throws {
        let source = fetch(["1", "2", "3"])
        source.replay = .none
        let parse = Parse()
        parse.inject(from: source) { parse, data in parse.data = data }
        #expect(source.replay == .latest)
        #expect(try await parse.value == "parsed 3")
    }

    @Test func inAQueueOfYours_anyOrder_serialOrWide_suspended() async {
        for (width, parseFirst, suspended) in [(1, true, false), (1, false, true), (4, true, true), (4, false, false)] {
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = width
            queue.isSuspended = suspended
            let source = fetch(["queued"])
            let parse = Parse()
            parse.inject(from: source) { parse, data in parse.data = data }
            let operations: [Operation] = parseFirst ? [parse, source] : [source, parse]
            for operation in operations { queue.addOperation(operation) }
            #expect(!parse.isReady || source.isFinished, "not ready before its dependency finished")
            queue.isSuspended = false
            let state = await terminalState(of: parse)
            #expect("\(state)" == "completed", "width \(width), parse first: \(parseFirst)")
            #expect(parse.data == "queued")
        }
    }

    @Test func beside_aPlainBlockOperation() async {
        let queue = OperationQueue()
        let log = Locked<[String]>([])
        let source = fetch(["v"])
        let plain = BlockOperation { log.withLock { $0.append("plain") } }
        let parse = Parse()
        parse.addDependency(plain)
        parse.inject(from: source) { parse, data in
            log.withLock { $0.append("inject") }
            parse.data = data
        }
        for operation in [parse, plain, source] as [Operation] { queue.addOperation(operation) }
        #expect("\(await terminalState(of: parse))" == "completed")
        #expect(log.withLock { $0 } == ["plain", "inject"])
    }

    @Test func bothCommandsAreReleased_whenTheCallerLetsGo() async throws {
        let tracker = LeakTracker()
        do {
            let source = fetch(["x"])
            let parse = Parse()
            parse.inject(from: source) { parse, data in parse.data = data }
            tracker.track(parse)
            _ = try await parse.value
        }
        #expect(await tracker.waitForRelease() == [])
        weak var neverRun: Parse?
        weak var neverRunSource: Command<String>?
        do {
            let source = fetch(["x"])
            let parse = Parse()
            parse.inject(from: source) { parse, data in parse.data = data }
            neverRun = parse
            neverRunSource = source
        }
        #expect(neverRun == nil && neverRunSource == nil, "never executed: nothing holds either")
    }

    @Test func aLateInjection_isIgnored_withADiagnostic() async throws {
        let parse = Parse()
        parse.name = "late parse"
        let probe = DiagnosticsProbe(for: parse)
        parse.inject(from: fetch(["x"])) { parse, data in parse.data = data }
        _ = try await parse.value
        parse.inject(from: fetch(["y"])) { parse, data in parse.data = data }
        #expect(parse.data == "x")
        #expect(probe.diagnostics.contains { $0.code == .changedAfterStart && $0.command == "late parse" })
    }

    /// Injections through a chain thousands deep: each command injects from the previous one.
    @Test func aChainThousandsDeep() async throws {
        let depth = StressScale.pick(short: 2_000, long: 5_000, sanitized: 500)
        final class Step: Command<Int>, @unchecked Sendable {
            // Written by the injection before the run, read in `run`.
            var input = 0
            override func run(_ result: CommandResult<Int>) -> (any Cancelable)? {
                result.succeed(input + 1)
                return nil
            }
        }
        var last = Step()
        let first = last
        for _ in 1..<depth {
            let next = Step()
            next.inject(from: last) { step, value in step.input = value }
            last = next
        }
        _ = first
        #expect(try await last.value == depth)
    }
}
