// swift run Inspector [PATH] [--port P]: a store with a few runs of each kind, worked here, and the
// inspector serving them (http://127.0.0.1:8080 by default; --port 0 picks a free port). Runs until
// interrupted. The browser test (scripts/check-inspector.sh) drives it with Chromium.
//
// The runs: 6 uploads (a 3-step chain, completed), a report (3 parts and a join) whose `render` step fails
// on its first attempt with an error holding markup, an approval waiting for an event (tagged `vip`), and
// a report cancelled while it waits.
import CommandDurable
import Foundation

struct AppError: Error, CustomStringConvertible {
    let description: String
}

struct Upload: DurableWorkflow {
    static let name = "upload"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<String> {
        let resized = flow.step("resize") { _ in Command.just("\(input) resized") }
        let stored = flow.step("store", after: resized) { _, file in Command.just("\(file), stored") }
        return flow.step("notify", after: stored) { _, file in Command.just("\(file), notified") }
    }
}

struct Report: DurableWorkflow {
    static let name = "report"

    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<String> {
        let sales = flow.step("sales") { _ in Command.just(input * 3) }
        let costs = flow.step("costs") { _ in Command.just(input) }
        let render = flow.step("render", after: sales, costs) { context, sales, costs in
            Command<Int> { result in
                // Fails on the first attempt (a retry from the inspector runs attempt 2).
                if context.attempt == 1 {
                    result.fail(AppError(description: "<script>alert(1)</script> template missing"))
                } else {
                    result.succeed(sales - costs)
                }
                return nil
            }
        }
        return flow.step("publish", after: render) { _, margin in Command.just("margin \(margin)") }
    }
}

struct Approve: DurableWorkflow {
    static let name = "approve"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<String> {
        let asked = flow.step("ask") { _ in Command.just("asked \(input)") }
        let answer = flow.event("answer", of: String.self, timeout: .seconds(86_400), waitingFor: [asked])
        return flow.step("record", after: answer) { _, answer in Command.just(answer ?? "no answer") }
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
var port = 8080
if let index = arguments.firstIndex(of: "--port"), index + 1 < arguments.count {
    port = Int(arguments[index + 1]) ?? 8080
    arguments.removeSubrange(index...(index + 1))
}
let path =
    arguments.first
    ?? FileManager.default.temporaryDirectory.appendingPathComponent("awesomecommand-inspector.sqlite")
    .path
for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }

let store = try DurableStore(path: path, durability: .normal)
try store.register(Upload.self)
try store.register(Report.self)
try store.register(Approve.self)
let worker = try store.work(concurrency: 4)
for index in 1...6 { _ = try await store.enqueue(Upload.self, id: "upload-\(index)", input: "photo\(index).jpg").value }
let report = try await store.enqueue(Report.self, id: "report-march", input: 10)
_ = try? await report.value
_ = try await store.enqueue(
    Approve.self, id: "approve-42", input: "order 42", options: DurableRunOptions(tags: ["vip"]))
let cancelled = try await store.enqueue(Approve.self, id: "approve-7", input: "order 7")
try await store.cancel(runID: cancelled.id)
let server = try DurableInspector(store: store).serve(port: port)
print("inspector: \(server.url)")
fflush(nil)
while true { try await Task.sleep(nanoseconds: 3_600_000_000_000) }
_ = worker
