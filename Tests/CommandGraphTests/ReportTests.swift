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
}
