// swift run Onboarding: the README's onboarding workflow scaled to seconds, on an SQLite file of its own.
// A welcome mail, a sleep of 2 s (its end recorded), a tip, a wait of up to 10 s for an approval that a
// second process (this program again, `--send-approval`) sends to the run, a child run issuing a card,
// and a last mail on a queue of one per user; beside it, a schedule firing a heartbeat every second.
// Prints the timeline: each step's start and end from the run's creation, and the heartbeats fired.
import CommandDurable
import Foundation

struct Approval: Codable, Sendable { var by: String }

func sendMail(to user: String, _ subject: String) -> Command<String> { Command.just("\(subject) -> \(user)") }

struct IssueCard: DurableWorkflow {
    static let name = "issue-card"
    struct Input: Codable, Sendable {
        var user: String
        var approved: Bool
    }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<String> {
        flow.step("card") { _ in Command.just(input.approved ? "card for \(input.user)" : "no card") }
    }
}

struct Heartbeat: DurableWorkflow {
    static let name = "heartbeat"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<String> {
        flow.step("beat") { context in Command.just(context.runID) }
    }
}

extension DurableQueue {
    static let mail = DurableQueue("mail", concurrency: 10, perKey: 1, rate: DurableRate(5, per: .seconds(1)))
}

struct Onboarding: DurableWorkflow {
    static let name = "onboarding"
    struct Input: Codable, Sendable { var user: String }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Bool> {
        let welcome = flow.step("welcome", timeout: .seconds(30)) { _ in sendMail(to: input.user, "welcome") }
        let day = flow.sleep("one-day", for: .seconds(2), waitingFor: [welcome])
        let tip = flow.step("tip", waitingFor: [day]) { _ in sendMail(to: input.user, "tip") }
        let approval = flow.event("approval", of: Approval.self, timeout: .seconds(10), waitingFor: [tip])
        let card = flow.child("card", IssueCard.self, after: approval) { _, approval in
            IssueCard.Input(user: input.user, approved: approval != nil)
        }
        return flow.step("done", after: card, queue: .mail, key: input.user) { _, card in
            sendMail(to: input.user, card).map { _ in true }
        }
    }
}

let arguments = CommandLine.arguments
// The second process: sends the approval to the run, from outside the process that runs it.
if arguments.count == 4, arguments[1] == "--send-approval" {
    let store = try DurableStore(path: arguments[2])
    try await store.send(Approval(by: "ops (pid \(getpid()))"), event: "approval", toRun: arguments[3])
    print("[second process] sent the approval to \(arguments[3])")
    store.close()
    exit(0)
}

let path = FileManager.default.temporaryDirectory.appendingPathComponent("onboarding-\(getpid()).sqlite").path
defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
let store = try DurableStore(path: path)
for workflow in [Onboarding.self, IssueCard.self, Heartbeat.self] as [any DurableWorkflow.Type] {
    try store.register(workflow)
}
let worker = try store.work(concurrency: 4)
try await store.schedule(Heartbeat.self, id: "beat", every: .seconds(1), input: "", catchUp: .skip)
let run = try await store.enqueue(
    Onboarding.self, id: "onboarding-42", input: .init(user: "42"), options: .init(tags: ["user:42"]))
print("enqueued onboarding-42; waiting for its approval step to begin waiting")
fflush(nil)  // before the second process prints

// Once the run waits for its approval, a second process sends it.
while true {
    let record = try await store.runs(.tagged("user:42")).first
    if record?.steps.first(where: { $0.id == "approval" })?.nextAttempt != nil { break }
    try await Task.sleep(nanoseconds: 20_000_000)  // a demo's poll of the records, not the library's
}
let sender = Process()
sender.executableURL = URL(fileURLWithPath: arguments[0])
sender.arguments = ["--send-approval", path, "onboarding-42"]
let sent = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
    sender.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
    do { try sender.run() } catch { continuation.resume(throwing: error) }
}
guard sent == 0 else {
    print("the second process failed (\(sent))")
    exit(1)
}
print("run value: \(try await run.value)")
try await store.unschedule(id: "beat")
await worker.stop()

let records = try await store.runs()
guard let onboarding = records.first(where: { $0.id == "onboarding-42" }) else { exit(1) }
func offset(_ date: Date?) -> String {
    date.map { String(format: "%6.2f s", $0.timeIntervalSince(onboarding.created)) } ?? "      -"
}
print("timeline of onboarding-42 (from its creation):")
for step in onboarding.steps {
    let value = step.value.map { String(decoding: $0, as: UTF8.self) } ?? ""
    print(
        "  \(step.id.padding(toLength: 9, withPad: " ", startingAt: 0)) \(offset(step.started)) -> \(offset(step.ended))  \(value)"
    )
}
if let child = records.first(where: { $0.parent == "onboarding-42" }) {
    print(
        "child run \(child.id): \(child.state), value \(child.output.map { String(decoding: $0, as: UTF8.self) } ?? "")"
    )
}
let beats = records.filter { $0.workflow == Heartbeat.name }
print("heartbeats fired: \(beats.count) (\(beats.map(\.id).prefix(3).joined(separator: ", "))...)")
store.close()
