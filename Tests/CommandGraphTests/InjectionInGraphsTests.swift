import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

private struct Model: Sendable, Equatable { let text: String }

/// The issue's `Parse`: a subclass whose input is injected.
private final class Parse: Command<Model>, @unchecked Sendable {
    // Written by the injection before the command runs, read in `run`.
    var data: Data?

    override func run(_ result: CommandResult<Model>) -> (any Cancelable)? {
        result.succeed(Model(text: String(decoding: data ?? Data(), as: UTF8.self)))
        return nil
    }
}

private func fetchCommand(_ text: String) -> Command<Data> {
    let fetch = Command<Data> { result in
        DispatchQueue.global().async { result.succeed(Data(text.utf8)) }
        return nil
    }
    fetch.name = "fetch"
    return fetch
}

/// `inject(from:_:)` in the structures a graph is built up front with: a `Graph`, a `GroupCommand`
/// (ProcedureKit's `test__binding`: a group whose input is injected), and combinators.
@Suite struct InjectionInGraphsTests {
    @Test func fetchThenParse_inAGraph_asTheIssueWritesIt() async throws {
        let graph = Graph()
        let fetch = fetchCommand("hello")
        let parse = Parse()
        parse.inject(from: fetch) { parse, data in parse.data = data }  // `parse` typed as Parse
        try graph.add(fetch)
        try graph.add(parse)
        try graph.run()
        let outcome = await graph.outcome
        #expect(outcome.succeeded)
        #expect(try await parse.value == Model(text: "hello"))
    }

    @Test func fetchThenParse_asAGroupsChildren() async throws {
        let fetch = fetchCommand("grouped")
        let parse = Parse()
        parse.inject(from: fetch) { parse, data in parse.data = data }
        let group = GroupCommand(name: "group", children: [parse, fetch])
        let outcome = try await group.value
        #expect(outcome.succeeded && outcome.completed.count == 2)
        #expect(try await parse.value == Model(text: "grouped"))
    }

    /// A group whose children are chosen from an injected value, before it runs.
    @Test func intoAGroup_itsChildrenChosenFromTheValue() async throws {
        let count = Command<Int> { result in
            result.succeed(3)
            return nil
        }
        let ran = Locked(0)
        let group = GroupCommand(name: "batch")
        group.inject(from: count) { group, count in
            for index in 0..<count {
                let child = Command<Void> { result in
                    ran.withLock { $0 += 1 }
                    result.succeed()
                    return nil
                }
                child.name = "child \(index)"
                group.add(child: child)
            }
        }
        let outcome = try await group.value
        #expect(outcome.succeeded)
        #expect(ran.withLock { $0 } == 3)
        #expect(outcome.completed.sorted() == ["child 0", "child 1", "child 2"])
    }

    /// Fifty parses, each fed by its own fetch, zipped: injection works beside the combinators.
    @Test func manyInjectedCommands_zippedTogether() async throws {
        let parses = (0..<50).map { index -> Parse in
            let parse = Parse()
            parse.inject(from: fetchCommand("\(index)")) { parse, data in parse.data = data }
            return parse
        }
        let all = try await Command<Model>.zip(parses).value
        #expect(Set(all.map(\.text)) == Set((0..<50).map(String.init)))
    }
}
