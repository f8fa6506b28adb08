import CommandCore
import Dispatch
import Foundation

/// Pictures and reports of a graph of commands: Graphviz DOT, Mermaid, a Chrome trace of a run, and a
/// stall report. Each walks every command reachable from `roots` through dependencies and combinator
/// inputs, reading each command's `state` and `timing`; call them at any time, from any thread (a
/// graph still running is drawn as it is now).
///
/// - Complexity: O(commands + edges) reachable from the roots.
public enum GraphReport {
    /// One command or plain operation and its edges, as read once.
    struct Node {
        let id: Int
        let name: String
        /// False for a plain `Operation` (a dependency that is not a command).
        let isCommand: Bool
        let state: CommandState
        let timing: CommandTiming
        let dependencies: [ObjectIdentifier]
        let inputs: [ObjectIdentifier]
        /// Commands a combinator subscribed to while running (`then { }`, `flatMap`, `catch`, `retry`,
        /// `bind`), still alive.
        let runTime: [ObjectIdentifier]
        /// Its mutually exclusive categories.
        var categories: [String] = []
        /// Its conditions' check, while it is under way: "evaluating" or "waitingForCategories".
        var gatePhase: String?
        /// Who holds the categories it waits for.
        var holders: [(category: String, holder: String, since: UInt64)] = []
        /// A group's children (see `GroupCommand`).
        var members: [ObjectIdentifier] = []
    }

    /// The commands and plain operations reachable from `roots` through dependencies, combinator
    /// inputs and run-time inputs, each once, each read once.
    static func walk(_ roots: [Operation]) -> (nodes: [Node], index: [ObjectIdentifier: Int]) {
        var nodes: [Node] = []
        var index: [ObjectIdentifier: Int] = [:]
        var stack = roots
        func ids(_ operations: [Operation]) -> [ObjectIdentifier] { operations.map(ObjectIdentifier.init) }
        while let operation = stack.popLast() {
            guard index[ObjectIdentifier(operation)] == nil else { continue }
            index[ObjectIdentifier(operation)] = nodes.count
            if let command = operation as? any CommandFace {
                let (dependencies, inputs, runTime) =
                    (command.dependencies, command.inputCommands, command.runTimeInputs)
                let gatePhase = command.gatePhase
                nodes.append(
                    Node(
                        id: nodes.count, name: command.displayName, isCommand: true, state: command.state,
                        timing: command.timing, dependencies: ids(dependencies), inputs: ids(inputs),
                        runTime: ids(runTime), categories: command.mutuallyExclusiveCategories, gatePhase: gatePhase,
                        holders: gatePhase == "waitingForCategories" ? command.categoryHolders : []))
                stack += dependencies + inputs + runTime
                if let group = operation as? GroupCommand {
                    let members = group.children
                    nodes[nodes.count - 1].members = ids(members)
                    stack += members
                }
            } else {
                let dependencies = operation.dependencies
                nodes.append(
                    Node(
                        id: nodes.count, name: operationName(operation),
                        isCommand: false, state: plainState(operation), timing: CommandTiming(),
                        dependencies: ids(dependencies), inputs: [], runTime: []))
                stack += dependencies
            }
        }
        return (nodes, index)
    }

    /// A plain operation's state in a command's terms: finished (cancelled or not), executing, or not
    /// started.
    static func plainState(_ operation: Operation) -> CommandState {
        if operation.isFinished {
            guard operation.isCancelled else { return .completed }
            let name = operationName(operation)
            return .cancelled(CommandError(code: .cancelled, command: name, message: "'\(name)' was cancelled."))
        }
        return operation.isExecuting ? .executing : .pending
    }

    static func label(_ node: Node) -> String {
        var label = "\(node.name)\n\(node.isCommand ? "" : "Operation, ")\(node.state.shortName)"
        if let duration = node.timing.runDuration { label += ", \(format(duration))" }
        if !node.categories.isEmpty { label += "\nexclusive: \(node.categories.joined(separator: ", "))" }
        return label
    }

    static func format(_ duration: Duration) -> String {
        let microseconds = duration.inSeconds * 1e6
        return microseconds >= 1000
            ? String(format: "%.1f ms", microseconds / 1000) : String(format: "%.0f us", microseconds)
    }

    /// The graph in Graphviz DOT: a box per command (name, state, run time, colour by state), an
    /// ellipse per plain `Operation` dependency (its `name`, its state), a solid edge from each
    /// dependency, a dashed one from each combinator input, a dotted blue one from each command a
    /// combinator subscribed to while running (the next command of `then { }`, `flatMap` inners, a
    /// `catch` recovery, `retry` attempts, `bind`'s chain; while they are alive). Render with
    /// `dot -Tpng graph.dot -o graph.png`.
    public static func dot(_ roots: Operation...) -> String { dot(roots) }

    /// The graph in Graphviz DOT; see ``dot(_:)-(Operation...)``.
    public static func dot(_ roots: [Operation]) -> String {
        let (nodes, index) = walk(roots)
        var lines = [
            "digraph Commands {", "    rankdir=LR;",
            "    node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];",
        ]
        for node in nodes {
            let text = label(node).replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(
                of: "\"", with: "\\\""
            )
            .replacingOccurrences(of: "\n", with: "\\n")
            let shape = node.isCommand ? "" : ", shape=ellipse"
            lines.append("    n\(node.id) [label=\"\(text)\", fillcolor=\"\(node.state.colour)\"\(shape)];")
        }
        lines += clusters(nodes, index) { node, depth, members in
            let indent = String(repeating: "    ", count: depth + 1)
            return [
                "\(indent)subgraph cluster_n\(node.id) {", "\(indent)    label=\"\(node.name)\"; style=dashed;",
                "\(indent)    n\(node.id);",
            ] + members + ["\(indent)}"]
        } member: { node, depth in
            "\(String(repeating: "    ", count: depth + 2))n\(node.id);"
        }
        for node in nodes {
            for dependency in node.dependencies { lines.append("    n\(index[dependency]!) -> n\(node.id);") }
            for input in node.inputs { lines.append("    n\(index[input]!) -> n\(node.id) [style=dashed];") }
            for input in node.runTime {
                lines.append("    n\(index[input]!) -> n\(node.id) [style=dotted, color=\"#1f77b4\"];")
            }
        }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    /// The graph as a Mermaid flowchart (GitHub renders it in Markdown): a rectangle per command, a
    /// stadium per plain `Operation`; `-->` from a dependency, `-.->` from a combinator input,
    /// `-. run time .->` from a command a combinator subscribed to while running.
    public static func mermaid(_ roots: Operation...) -> String { mermaid(roots) }

    /// The graph as a Mermaid flowchart; see ``mermaid(_:)-(Operation...)``.
    public static func mermaid(_ roots: [Operation]) -> String {
        let (nodes, index) = walk(roots)
        var lines = ["flowchart LR"]
        for node in nodes {
            let text = label(node).replacingOccurrences(of: "\"", with: "'").replacingOccurrences(
                of: "\n", with: "<br/>")
            lines.append(node.isCommand ? "    n\(node.id)[\"\(text)\"]" : "    n\(node.id)([\"\(text)\"])")
        }
        lines += clusters(nodes, index) { node, depth, members in
            let indent = String(repeating: "    ", count: depth + 1)
            let title = node.name.replacingOccurrences(of: "\"", with: "'")
            return ["\(indent)subgraph g\(node.id) [\"\(title)\"]", "\(indent)    n\(node.id)"] + members + [
                "\(indent)end"
            ]
        } member: { node, depth in
            "\(String(repeating: "    ", count: depth + 2))n\(node.id)"
        }
        for node in nodes {
            for dependency in node.dependencies { lines.append("    n\(index[dependency]!) --> n\(node.id)") }
            for input in node.inputs { lines.append("    n\(index[input]!) -.-> n\(node.id)") }
            for input in node.runTime { lines.append("    n\(index[input]!) -. run time .-> n\(node.id)") }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The clusters of the groups among `nodes` (a group's children, a nested group as a cluster inside
    /// its parent's), each drawn by `cluster` (given its member lines) and `member`.
    static func clusters(
        _ nodes: [Node], _ index: [ObjectIdentifier: Int],
        cluster: (Node, _ depth: Int, _ members: [String]) -> [String], member: (Node, _ depth: Int) -> String
    ) -> [String] {
        let nested = Set(nodes.flatMap(\.members))
        var drawn = Set<Int>()
        func draw(_ group: Node, depth: Int) -> [String] {
            drawn.insert(group.id)
            var lines: [String] = []
            for id in group.members {
                guard let position = index[id], !drawn.contains(position) else { continue }
                let child = nodes[position]
                if child.members.isEmpty {
                    drawn.insert(position)
                    lines.append(member(child, depth))
                } else {
                    lines += draw(child, depth: depth + 1)
                }
            }
            return cluster(group, depth, lines)
        }
        var identity: [Int: ObjectIdentifier] = [:]
        for (id, position) in index { identity[position] = id }
        var lines: [String] = []
        for node in nodes where !node.members.isEmpty && !drawn.contains(node.id) {
            if let id = identity[node.id], nested.contains(id) { continue }
            lines += draw(node, depth: 0)
        }
        return lines
    }

    /// A run as Chrome trace-event JSON (load it in Perfetto or chrome://tracing): per command, a
    /// complete event ("X") from `run` to its end on the thread it ran on, and an instant event ("i")
    /// when it became ready. Times are microseconds since the earliest recorded event.
    public static func chromeTrace(_ roots: Operation...) -> String { chromeTrace(roots) }

    /// A run as Chrome trace-event JSON; see ``chromeTrace(_:)-(Operation...)``.
    public static func chromeTrace(_ roots: [Operation]) -> String {
        let (nodes, index) = walk(roots)
        let origin = nodes.compactMap { $0.timing.executedAt ?? $0.timing.readyAt }.min() ?? 0
        func microseconds(_ time: UInt64) -> Double { Double(time &- origin) / 1000 }
        var events: [[String: Any]] = []
        var threads: [UInt64: Int] = [:]
        // A group's children get a row each (named after the child), below the threads' rows.
        let grouped = Set(nodes.flatMap(\.members).compactMap { index[$0] })
        for position in grouped.sorted() {
            events.append([
                "name": "thread_name", "ph": "M", "pid": 1, "tid": 1000 + position,
                "args": ["name": "\(nodes[position].name) (in a group)"],
            ])
        }
        for node in nodes {
            if let ready = node.timing.readyAt {
                events.append([
                    "name": "\(node.name) ready", "ph": "i", "s": "g", "ts": microseconds(ready), "pid": 1, "tid": 0,
                ])
            }
            guard let started = node.timing.startedAt else { continue }
            let thread =
                node.timing.threadID.map { id in
                    threads[id]
                        ?? {
                            threads[id] = threads.count + 1; return threads.count
                        }()
                } ?? 0
            let ended = node.timing.endedAt ?? started
            events.append([
                "name": node.name, "cat": node.state.shortName, "ph": "X", "ts": microseconds(started),
                "dur": Double(ended &- started) / 1000, "pid": 1,
                "tid": grouped.contains(node.id) ? 1000 + node.id : thread,
                "args": ["state": "\(node.state)"],
            ])
        }
        let document: [String: Any] = ["traceEvents": events, "displayTimeUnit": "ms"]
        guard let data = try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys]) else {
            return "{}"
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// What a graph that has not finished is waiting for: each command (and plain `Operation`) not
    /// ended, its state, how long it has been waiting, and what it waits on that has not ended: its
    /// dependencies (plain operations included, by `name`), its inputs, and the commands it subscribed
    /// to while running (a hang inside `then { }`'s next command names that command, not just the
    /// `then` node). Empty when everything ended.
    public static func stalls(_ roots: Operation...) -> String { stalls(roots) }

    /// What a graph that has not finished is waiting for; see ``stalls(_:)-(Operation...)``.
    public static func stalls(_ roots: [Operation]) -> String {
        let (nodes, index) = walk(roots)
        let now = DispatchTime.now().uptimeNanoseconds
        func describe(_ ids: [ObjectIdentifier]) -> String {
            ids.map { nodes[index[$0]!] }.filter { !$0.state.isTerminal }.map {
                "'\($0.name)' (\($0.isCommand ? "" : "Operation, ")\($0.state.shortName))"
            }.joined(separator: ", ")
        }
        var lines: [String] = []
        for node in nodes where !node.state.isTerminal {
            let since = node.timing.startedAt ?? node.timing.readyAt ?? node.timing.executedAt
            let waited = since.map { " for \(format(.nanoseconds(Int64(now &- $0))))" } ?? ""
            let blockers = describe(node.dependencies + node.inputs)
            let runTime = describe(node.runTime)
            let what: String
            if !node.isCommand {
                switch node.state {
                case .executing: what = "(Operation) executing"
                default:
                    what =
                        blockers.isEmpty
                        ? "(Operation) not started: the queue you added it to starts it (commands never start a plain operation they depend on)"
                        : "(Operation) waiting on \(blockers)"
                }
            } else {
                switch node.state {
                case .executing:
                    what = "running\(waited)" + (runTime.isEmpty ? "" : ", waiting on its run-time input \(runTime)")
                default:
                    if node.timing.executedAt == nil && node.gatePhase != "evaluating"
                        && node.gatePhase != "waitingForCategories"
                    {
                        what = "never executed"
                    } else if node.gatePhase == "evaluating" {
                        what = "waiting\(waited) for its conditions to be evaluated"
                    } else if node.gatePhase == "waitingForCategories" {
                        let held = node.holders.map {
                            "category '\($0.category)' held by '\($0.holder)' (running \(format(.nanoseconds(Int64(now &- $0.since)))))"
                        }
                        what =
                            held.isEmpty
                            ? "waiting\(waited) for its categories \(node.categories.map { "'\($0)'" }.joined(separator: ", "))"
                            : "waits for \(held.joined(separator: ", "))"
                    } else if blockers.isEmpty {
                        what = "ready, waiting to start (for an admission slot or in its queue)\(waited)"
                    } else {
                        what = "waiting\(waited) on \(blockers)"
                    }
                }
            }
            lines.append("'\(node.name)': \(what)")
        }
        return lines.joined(separator: "\n")
    }
}

extension CommandState {
    var shortName: String {
        switch self {
        case .pending: return "pending"
        case .executing: return "executing"
        case .completed: return "completed"
        case .failed: return "failed"
        case .cancelled: return "cancelled"
        }
    }

    var colour: String {
        switch self {
        case .pending: return "#eeeeee"
        case .executing: return "#fdf0d5"
        case .completed: return "#dff0d8"
        case .failed: return "#f2dede"
        case .cancelled: return "#e8e0f0"
        }
    }
}
