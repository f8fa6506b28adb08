import CommandDurable
import CommandTestSupport
import Foundation

/// A fresh folder for a test's store files, removed by `remove()`.
struct TemporaryFolder {
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "durable-tests-\(UUID().uuidString)", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func file(_ name: String = "work.sqlite") -> String { url.appendingPathComponent(name).path }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// How many times each step's command was made, by step id (across runs of a test).
final class RunCounter: Sendable {
    private let counts = Locked<[String: Int]>([:])
    func hit(_ step: String) { counts.withLock { $0[step, default: 0] += 1 } }
    func count(_ step: String) -> Int { counts.withLock { $0[step] ?? 0 } }
    var total: Int { counts.withLock { $0.values.reduce(0, +) } }
}

/// Counters and gates the test workflows read (workflows are types: their steps reach tests through
/// these, by run id).
enum Probe {
    static let counter = RunCounter()
    /// Commands that never end, by step id, until released.
    static let held = Locked<[String: CommandResult<Int>]>([:])
    /// Failures left, by step id.
    static let failuresLeft = Locked<[String: Int]>([:])

    /// A step that fails while `failuresLeft[input]` lasts ("flaky attempt <n>"), then sends its attempt.
    static func flaky(_ input: String, _ context: StepContext) -> Command<Int> {
        Command<Int> { result in
            counter.hit("\(input)/flaky")
            let fail = failuresLeft.withLock { left -> Bool in
                let remaining = left[input, default: 0]
                left[input] = remaining - 1
                return remaining > 0
            }
            if fail {
                result.fail(TestFailure(message: "flaky attempt \(context.attempt)"))
            } else {
                result.succeed(context.attempt)
            }
            return nil
        }
    }

    static func value(_ step: String, _ value: Int) -> Command<Int> {
        Command<Int> { result in
            counter.hit(step)
            DispatchQueue.global().async { result.succeed(value) }
            return nil
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// a, b in parallel, then "sum" of both: 2 + 3.
struct Sum: DurableWorkflow {
    static let name = "sum"
    struct Input: Codable, Sendable { var tag: String }

    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Int> {
        let a = flow.step("a") { _ in Probe.value("\(input.tag)/a", 2) }
        let b = flow.step("b") { _ in Probe.value("\(input.tag)/b", 3) }
        return flow.step("sum", after: a, b) { _, a, b in Probe.value("\(input.tag)/sum", a + b) }
    }
}
