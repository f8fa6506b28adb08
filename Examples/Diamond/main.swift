// swift run Diamond
//
// The original AwesomeCommand README's graph: six commands 0...5, each on its own queue with a small
// simulated latency; 3 runs after 1 and 2 completed, 0 after 3 and 4; the output combines 0 and 5 with
// a reduce that adds their values. Prints the final value, when each command started and finished
// (relative ms, on which queue), and where the final callback ran; writes the graph as Graphviz DOT and
// the run as a Chrome trace.
import CommandGraph
import Dispatch
import Foundation

let started = DispatchTime.now().uptimeNanoseconds
func ms() -> String { String(format: "%6.1f ms", Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6) }

/// Prints as it goes, from any thread, one line at a time.
let printer = DispatchQueue(label: "printer")
func say(_ line: String) { printer.sync { print(line) } }

/// Command `index`: waits `latency` ms (the simulated work), then sends `index * 10 + 1`.
func step(_ index: Int, latency: Int) -> Command<Int> {
    let command = Command<Int> { result in
        let queue = OperationQueue.current?.name ?? "?"
        say("\(ms())  start  \(index)  on OperationQueue '\(queue)'")
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(latency)) {
            say("\(ms())  finish \(index)  -> \(index * 10 + 1)")
            result.succeed(index * 10 + 1)
        }
        return nil
    }
    command.name = "command \(index)"
    return command
}

let commands = [30, 20, 40, 10, 25, 15].enumerated().map { step($0.offset, latency: $0.element) }
commands[3].addDependency(commands[1])
commands[3].addDependency(commands[2])
commands[0].addDependency(commands[3])
commands[0].addDependency(commands[4])
let output = combineLatest(commands[0], commands[5]) { $0 + $1 }
output.name = "0 + 5"

say("graph: 1, 2 -> 3;  3, 4 -> 0;  combineLatest(0, 5) { $0 + $1 }")
output.execute(on: .main) { event in
    switch event {
    case .value(let value):
        say("\(ms())  output value \(value) (1 + 51), delivered on the main queue: \(CallbackContext.isMainQueue)")
    case .completed:
        say("\(ms())  output completed")
        // The graph as Graphviz DOT and the run as a Chrome trace (load it in Perfetto).
        let directory = FileManager.default.temporaryDirectory
        let dot = directory.appendingPathComponent("diamond.dot")
        let trace = directory.appendingPathComponent("diamond-trace.json")
        try? GraphReport.dot(output).write(to: dot, atomically: true, encoding: .utf8)
        try? GraphReport.chromeTrace(output).write(to: trace, atomically: true, encoding: .utf8)
        say("graph: \(dot.path) (dot -Tpng), trace: \(trace.path) (Perfetto, chrome://tracing)")
        exit(0)
    case .failed(let error), .cancelled(let error as any Error):
        say("\(ms())  output ended: \(error)")
        exit(1)
    }
}
dispatchMain()
