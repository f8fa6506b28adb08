// swift run Workflow
//
// An addDependency-style workflow with conditions, mutual exclusivity and a group, as people who
// learned them from "Advanced NSOperations" and ProcedureKit write them:
// - "show the inbox" has a condition "signed in" whose dependency is a sign-in command: the sign-in
//   runs first, then the condition is evaluated, then the inbox is shown;
// - two alerts in the category "alert" never overlap (each is on screen 30 ms);
// - a group "refresh" of three children, one of them showing an alert too: it runs inside the group's
//   hold of "alert" (the group shows a banner alert for its whole run), exclusive with its siblings,
//   not with the group, so nothing deadlocks;
// - a command whose condition is false ends cancelled without running, and says why;
// - a retry that sees the error: the first fetch is refused (an expired token), the decision runs a
//   "refresh token" command, then the next attempt succeeds;
// - fetch -> parse in a graph built up front: the parse command exists before the fetch ran, and
//   `inject(from:)` hands it the fetched data before it runs.
// Prints each step with its time and the outcome, then the stall-free picture of the group as Mermaid.
import CommandGraph
import Dispatch
import Foundation

let started = DispatchTime.now().uptimeNanoseconds
func ms() -> String { String(format: "%6.1f ms", Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6) }
let printer = DispatchQueue(label: "printer")
func say(_ line: String) { printer.sync { print(line) } }

/// The session the conditions read.
final class Session: Sendable {
    private let signedIn = Locked(false)
    var isSignedIn: Bool { signedIn.withLock { $0 } }
    func signIn() { signedIn.withLock { $0 = true } }
}
let session = Session()

/// A command that says when it starts and ends, lasting `milliseconds`.
func step(_ name: String, milliseconds: Int, work: @escaping @Sendable () -> Void = {}) -> Command<Void> {
    let command = Command<Void> { result in
        say("\(ms())  start  \(name)")
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) {
            work()
            say("\(ms())  end    \(name)")
            result.succeed()
        }
        return nil
    }
    command.name = name
    return command
}

/// "Signed in", offering to sign in first (its dependency).
struct SignedIn: CommandCondition {
    var name: String { "signed in" }
    func dependency(for command: Operation) -> Operation? {
        session.isSignedIn ? nil : step("sign in", milliseconds: 20) { session.signIn() }
    }
    func evaluate(for command: Operation) async throws -> Bool { session.isSignedIn }
}

func alert(_ name: String) -> Command<Void> {
    let command = step(name, milliseconds: 30)
    command.add(condition: MutuallyExclusive(category: "alert"))
    return command
}

let inbox = step("show inbox", milliseconds: 10)
inbox.add(condition: SignedIn())

let welcome = alert("alert: welcome")
let news = alert("alert: news")

let refresh = GroupCommand(
    name: "refresh",
    children: [
        step("fetch mail", milliseconds: 25), step("fetch contacts", milliseconds: 15), alert("alert: new mail"),
    ])
refresh.add(condition: MutuallyExclusive(category: "alert"))  // the group's banner for its whole run
refresh.addDependency(inbox)

let offline = step("sync while offline", milliseconds: 10)
offline.add(condition: BlockCondition(name: "offline") { false })

let graph = Graph()
for command in [inbox, welcome, news, offline] { try graph.add(command) }
try graph.add(refresh, dependsOn: [inbox])
try graph.run(on: .immediate)
let outcome = await graph.outcome

say("")
say("completed: \(outcome.completed.sorted().joined(separator: ", "))")
say("cancelled: \(outcome.cancelled.sorted().joined(separator: ", "))")
if case .cancelled(let error) = offline.state { say("why: \(error.message)") }
say("")
say(GraphReport.mermaid(refresh))
guard outcome.completed.count == 4, outcome.cancelled == ["sync while offline"] else {
    say("unexpected outcome")
    exit(1)
}

/// What a server says to an expired token.
struct Unauthorized: Error {}
let token = Locked("expired")
let fetchMail = Command<String>.retry(
    2, delay: .constant(.milliseconds(10)),
    shouldRetry: { failure in
        guard failure.error is Unauthorized else { return .doNotRetry }
        return .recover(step("refresh token", milliseconds: 10) { token.withLock { $0 = "fresh" } })
    }
) { attempt in
    Command<String> { result in
        let current = token.withLock { $0 }
        say("\(ms())  fetch mail, attempt \(attempt.number), token \(current)")
        if current == "expired" { result.fail(Unauthorized()) } else { result.succeed("3 new messages") }
        return nil
    }
}
say("")
let mail = try await fetchMail.value
say("retry: \(mail)")
guard mail == "3 new messages", token.withLock({ $0 }) == "fresh" else {
    say("unexpected retry")
    exit(1)
}

/// Parses what was injected into it (built before the fetch ran).
final class ParseMail: Command<Int>, @unchecked Sendable {
    // Written by the injection before `run`, read in `run` (the gate orders the two).
    var raw: String?
    override func run(_ result: CommandResult<Int>) -> (any Cancelable)? {
        let count = raw?.split(separator: " ").first.flatMap { Int($0) }
        say("\(ms())  parse  \(raw ?? "nothing") -> \(count.map(String.init) ?? "?")")
        if let count { result.succeed(count) } else { result.fail(CocoaError(.coderReadCorrupt)) }
        return nil
    }
}
let parse = ParseMail()
parse.name = "parse mail"
let fetchAgain = Command<String> { result in
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(10)) { result.succeed("3 new messages") }
    return nil
}
fetchAgain.name = "fetch mail again"
parse.inject(from: fetchAgain) { parse, raw in parse.raw = raw }
let pipeline = Graph()
try pipeline.add(fetchAgain)
try pipeline.add(parse)
try pipeline.run(on: .immediate)
let parsed = await pipeline.outcome
let count = try await parse.value
say("injection: \(count) new messages")
guard parsed.succeeded, count == 3 else {
    say("unexpected injection")
    exit(1)
}
