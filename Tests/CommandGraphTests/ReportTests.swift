import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

private func step(_ index: Int) -> Command<Int> {
    let command = Command<Int> { result in
        DispatchQueue.global().async { result.succeed(index * 10 + 1) }
        return nil
    }
    command.name = "command \(index)"
    return command
}

/// The original README's graph, run to the end.
private func diamond() async throws -> (output: Command<Int>, commands: [Command<Int>]) {
    let commands = (0...5).map(step)
    commands[3].addDependency(commands[1])
    commands[3].addDependency(commands[2])
    commands[0].addDependency(commands[3])
    commands[0].addDependency(commands[4])
    let output = combineLatest(commands[0], commands[5]) { $0 + $1 }
    output.name = "0 + 5"
    #expect(try await output.value == 52)
    return (output, commands)
}

@Suite struct ReportTests {
    @Test func dot_drawsEveryCommand_dependencyEdgesSolid_inputEdgesDashed() async throws {
        let (output, commands) = try await diamond()
        let dot = GraphReport.dot(output)
        #expect(dot.hasPrefix("digraph Commands {"))
        #expect(dot.components(separatedBy: "[label=").count - 1 == 7)
        let edges = dot.split(separator: "\n").filter { $0.contains("->") }
        #expect(edges.filter { !$0.contains("dashed") }.count == 4)
        #expect(edges.filter { $0.contains("dashed") }.count == 2)
        #expect(dot.contains("command 3\\ncompleted"))
        withExtendedLifetime(commands) {}
    }

    @Test func mermaid_drawsTheSameGraph() async throws {
        let (output, commands) = try await diamond()
        let mermaid = GraphReport.mermaid(output)
        #expect(mermaid.hasPrefix("flowchart LR"))
        #expect(mermaid.components(separatedBy: " --> ").count - 1 == 4)
        #expect(mermaid.components(separatedBy: " -.-> ").count - 1 == 2)
        withExtendedLifetime(commands) {}
    }

    @Test func chromeTrace_isValidJSON_withAnEventPerRun_inDependencyOrder() async throws {
        let (output, commands) = try await diamond()
        let json = GraphReport.chromeTrace(output)
        let document = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        let events = try #require(document?["traceEvents"] as? [[String: Any]])
        let runs = events.filter { $0["ph"] as? String == "X" }
        #expect(runs.count == 7)
        func start(_ name: String) -> Double { runs.first { $0["name"] as? String == name }?["ts"] as? Double ?? -1 }
        func end(_ name: String) -> Double {
            let event = runs.first { $0["name"] as? String == name }
            return (event?["ts"] as? Double ?? 0) + (event?["dur"] as? Double ?? 0)
        }
        #expect(end("command 1") <= start("command 3"))
        #expect(end("command 3") <= start("command 0"))
        #expect(runs.allSatisfy { ($0["dur"] as? Double ?? -1) >= 0 })
        withExtendedLifetime(commands) {}
    }

    @Test func stallReport_namesWhatWaitsOnWhat() async {
        let started = Checkpoint()
        let held = Locked<CommandResult<Int>?>(nil)
        let slow = Command<Int> { result in
            held.withLock { $0 = result }
            started.fulfill()
            return nil
        }
        slow.name = "fetch"
        let parse = step(1)
        parse.name = "parse"
        parse.addDependency(slow)
        parse.execute(on: .immediate) { _ in }
        #expect(await started.wait())
        let report = GraphReport.stalls(parse)
        #expect(report.contains("'parse': waiting"))
        #expect(report.contains("on 'fetch' (executing)"))
        #expect(report.contains("'fetch': running"))
        let done = Checkpoint()
        parse.observeState(on: .immediate) { if $0.isTerminal { done.fulfill() } }
        held.withLock { $0 }?.succeed(1)
        #expect(await done.wait())
        #expect(GraphReport.stalls(parse).isEmpty)
    }

    /// A command waiting on a plain `Operation` nobody enqueued: the operation is drawn (by its
    /// `name`, as an ellipse / a stadium) and named in the stall report (not "waiting for an admission
    /// slot", which the command does not wait for).
    @Test func plainOperationDependency_isDrawnAndNamedInStalls() async {
        let gate = BlockOperation {}
        gate.name = "download gate"
        let parse = step(1)
        parse.name = "parse"
        parse.addDependency(gate)
        parse.execute(on: .immediate) { _ in }
        let report = GraphReport.stalls(parse)
        #expect(report.contains("'parse': waiting"))
        #expect(report.contains("on 'download gate' (Operation, pending)"))
        #expect(report.contains("'download gate': (Operation) not started"))
        #expect(!report.contains("admission slot"))
        let dot = GraphReport.dot(parse)
        #expect(dot.contains("download gate\\nOperation, pending"))
        #expect(dot.contains("shape=ellipse"))
        #expect(dot.split(separator: "\n").filter { $0.contains("->") }.count == 1)
        #expect(GraphReport.mermaid(parse).contains("([\"download gate<br/>Operation, pending\"])"))

        let done = Checkpoint()
        parse.observeState(on: .immediate) { if $0.isTerminal { done.fulfill() } }
        OperationQueue().addOperation(gate)
        #expect(await done.wait())
        #expect(GraphReport.stalls(parse).isEmpty)
        #expect(GraphReport.dot(parse).contains("download gate\\nOperation, completed"))
    }

    /// The original README's `then:^{ return signal_3; }`: the command `then { }` subscribes to at run
    /// time is drawn with its own edge style, and a hang inside it is reported as that command running
    /// (the `then` node waiting on it), not just the `then` node "running".
    @Test func thenClosure_runTimeInput_isDrawnAndNamedInStalls() async {
        let started = Checkpoint()
        let held = Locked<CommandResult<Int>?>(nil)
        let signal3 = Command<Int> { result in
            held.withLock { $0 = result }
            started.fulfill()
            return nil
        }
        signal3.name = "signal_3"
        let first = step(1)
        let output = first.then { signal3 }
        output.name = "then"
        output.execute(on: .immediate) { _ in }
        #expect(await started.wait())
        let report = GraphReport.stalls(output)
        #expect(report.contains("'then': running"))
        #expect(report.contains("waiting on its run-time input 'signal_3' (executing)"))
        #expect(report.contains("'signal_3': running"))
        let dot = GraphReport.dot(output)
        #expect(dot.contains("signal_3\\nexecuting"))
        #expect(dot.split(separator: "\n").filter { $0.contains("style=dotted") }.count == 1)
        #expect(GraphReport.mermaid(output).components(separatedBy: " -. run time .-> ").count - 1 == 1)
        let done = Checkpoint()
        output.observeState(on: .immediate) { if $0.isTerminal { done.fulfill() } }
        held.withLock { $0 }?.succeed(3)
        #expect(await done.wait())
        #expect(GraphReport.stalls(output).isEmpty)
    }

    /// `flatMap`, `catch`, `retry` and `bind` draw the commands they subscribed to at run time (while
    /// those are alive: kept here by the test).
    @Test func flatMapCatchRetryBind_drawTheirRunTimeInputs() async throws {
        struct Boom: Error {}
        let made = Locked<[Command<Int>]>([])
        @Sendable func keep(_ command: Command<Int>, _ name: String) -> Command<Int> {
            command.name = name
            made.withLock { $0.append(command) }
            return command
        }
        @Sendable func failing(_ name: String) -> Command<Int> {
            keep(
                Command<Int> { result in
                    result.fail(Boom())
                    return nil
                }, name)
        }
        func runTimeEdges(_ command: Command<Int>) -> Int {
            GraphReport.dot(command).split(separator: "\n").filter { $0.contains("style=dotted") }.count
        }
        let flat = step(1).flatMap { value in keep(step(value), "inner \(value)") }
        _ = try await flat.value
        #expect(runTimeEdges(flat) == 1)
        #expect(GraphReport.dot(flat).contains("inner 11"))

        let caught = failing("fails").catch { _ in keep(step(2), "recovery") }
        _ = try await caught.value
        #expect(runTimeEdges(caught) == 1)
        #expect(GraphReport.dot(caught).contains("recovery"))

        let attempts = Locked(0)
        let retried = Command<Int>.retry(2) {
            let attempt = attempts.withLock { count -> Int in
                count += 1
                return count
            }
            return attempt < 3 ? failing("attempt \(attempt)") : keep(step(3), "attempt 3")
        }
        _ = try await retried.value
        #expect(runTimeEdges(retried) == 3)

        let bound = step(4).bind { index, _, _, _ in index < 2 ? keep(step(5 + index), "link \(index + 1)") : nil }
        var chain: [Int] = []
        for try await value in bound.values { chain.append(value) }
        #expect(chain == [41, 51, 61])
        #expect(runTimeEdges(bound) == 2)
        withExtendedLifetime(made) {}
    }

    /// A command waiting for a category names it and its holder in the stall report; DOT and
    /// Mermaid mark every command's categories.
    @Test func stallReport_namesExclusivityWaits_andPicturesMarkCategories() async {
        // Categories are process-wide and tests run in parallel: this one is the test's own.
        let file = "file-\(UUID().uuidString)"
        let kept = Locked<CommandResult<Int>?>(nil)
        let running = Checkpoint()
        let backup = Command<Int> { result in
            kept.withLock { $0 = result }
            running.fulfill()
            return nil
        }
        backup.name = "backup"
        backup.add(condition: MutuallyExclusive(category: file))
        let save = Command<Int> { result in
            result.succeed(1)
            return nil
        }
        save.name = "save"
        save.add(condition: MutuallyExclusive(category: file))
        backup.execute(on: .immediate) { _ in }
        #expect(await running.wait())
        let saved = Checkpoint()
        save.execute(on: .immediate) { if $0.isTerminal { saved.fulfill() } }
        let report = GraphReport.stalls(save, backup)
        #expect(report.contains("'save': waits for category '\(file)' held by 'backup' (running "), "\(report)")
        #expect(GraphReport.dot(save).contains("exclusive: \(file)"))
        #expect(GraphReport.mermaid(save).contains("exclusive: \(file)"))
        kept.withLock { $0 }?.succeed(0)
        #expect(await saved.wait())
    }
}
