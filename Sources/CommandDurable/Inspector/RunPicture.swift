import Foundation

/// A run drawn as SVG by the inspector: its graph (steps in columns by depth, coloured by state, the
/// critical path marked) and its timeline (a bar per step from its start to its end). A value: the same
/// record gives the same picture, testable without a server. Every text is escaped.
struct RunPicture {
    let steps: [DurableStepRecord]
    /// The time a running step's bar ends at (the page's time).
    let now: Date

    static let colours: [DurableRunState: String] = [
        .pending: "#9aa0a6", .running: "#4285f4", .completed: "#34a853", .failed: "#ea4335",
        .cancelled: "#f9ab00",
    ]

    /// Each step's column: one more than the deepest step it comes after.
    var depths: [String: Int] {
        var depths: [String: Int] = [:]
        for step in steps {  // in recorded order: a step's predecessors come before it
            depths[step.id] = (step.after.compactMap { depths[$0] }.max() ?? -1) + 1
        }
        return depths
    }

    /// How long each step ran (a running step up to now; one that never started 0).
    func duration(_ step: DurableStepRecord) -> TimeInterval {
        guard let started = step.started else { return 0 }
        return max(0, (step.ended ?? now).timeIntervalSince(started))
    }

    /// The chain of steps whose durations add up to the most (ties: the later step), first to last.
    var criticalPath: [String] {
        var finish: [String: TimeInterval] = [:]
        var via: [String: String] = [:]
        for step in steps {
            let before = step.after.max { (finish[$0] ?? 0) < (finish[$1] ?? 0) }
            finish[step.id] = duration(step) + (before.flatMap { finish[$0] } ?? 0)
            via[step.id] = before
        }
        // The latest of the longest (a step that never ran, after the longest, ends the path).
        guard var last = steps.first?.id else { return [] }
        for step in steps where (finish[step.id] ?? 0) >= (finish[last] ?? 0) { last = step.id }
        var path = [last]
        while let previous = via[last] {
            path.append(previous)
            last = previous
        }
        return path.reversed()
    }

    /// The graph: a box per step (its id, state and attempts; the error in its title), an arrow per edge;
    /// the critical path's boxes and arrows drawn thick (class `critical`).
    var graph: String {
        let depths = depths
        let critical = Set(criticalPath)
        var rows: [Int: Int] = [:]
        var place: [String: (x: Int, y: Int)] = [:]
        for step in steps {
            let depth = depths[step.id] ?? 0
            let row = rows[depth, default: 0]
            rows[depth] = row + 1
            place[step.id] = (20 + depth * 190, 20 + row * 56)
        }
        let width = 20 + ((depths.values.max() ?? 0) + 1) * 190
        let height = 20 + (rows.values.max() ?? 1) * 56
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" class="graph" width="\(width)" height="\(height)" \
            viewBox="0 0 \(width) \(height)" role="img" aria-label="the run's graph">
            <defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" \
            orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#5f6368"/></marker></defs>

            """
        for step in steps {
            guard let to = place[step.id] else { continue }
            for before in step.after {
                guard let from = place[before] else { continue }
                let onPath = critical.contains(before) && critical.contains(step.id)
                svg += """
                    <path class="edge\(onPath ? " critical" : "")" d="M\(from.x + 150),\(from.y + 18) \
                    C\(from.x + 170),\(from.y + 18) \(to.x - 20),\(to.y + 18) \(to.x),\(to.y + 18)" fill="none" \
                    stroke="\(onPath ? "#202124" : "#9aa0a6")" stroke-width="\(onPath ? 3 : 1.5)" \
                    marker-end="url(#arrow)"/>

                    """
            }
        }
        for step in steps {
            guard let at = place[step.id] else { continue }
            let onPath = critical.contains(step.id)
            var title = "\(step.id): \(step.state.rawValue), attempt \(step.attempts)"
            if let owner = step.owner { title += ", owner \(owner)" }
            if let error = step.lastError { title += "\n\(error)" }
            let label = step.id.count > 18 ? String(step.id.prefix(17)) + "…" : step.id
            svg += """
                <g class="step \(step.state.rawValue)\(onPath ? " critical" : "")" data-step="\(Html.escape(step.id))">\
                <title>\(Html.escape(title))</title><rect x="\(at.x)" y="\(at.y)" width="150" height="36" rx="6" \
                fill="\(Self.colours[step.state] ?? "#9aa0a6")" stroke="#202124" stroke-width="\(onPath ? 3 : 0)"/>\
                <text x="\(at.x + 8)" y="\(at.y + 15)" font-size="12" fill="#fff">\(Html.escape(label))</text>\
                <text x="\(at.x + 8)" y="\(at.y + 30)" font-size="10" fill="#fff">\(step.state.rawValue) #\(step.attempts)\
                </text></g>

                """
        }
        return svg + "</svg>"
    }

    /// The timeline: a row per step, its bar from its start to its end (a running step's to now), with its
    /// attempts; steps that never started have no bar.
    var timeline: String {
        let starts = steps.compactMap(\.started)
        let width = 720
        let height = 24 + steps.count * 22
        guard let first = starts.min() else {
            return """
                <svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="\(width)" height="24">\
                <text x="0" y="16" font-size="12">no step has started</text></svg>
                """
        }
        let last = steps.map { $0.ended ?? ($0.started == nil ? first : now) }.max() ?? first
        let span = max(0.001, last.timeIntervalSince(first))
        let left = 160.0
        let scale = (Double(width) - left - 80) / span
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="\(width)" height="\(height)" \
            role="img" aria-label="the run's timeline">
            <text x="\(Int(left))" y="14" font-size="11" fill="#5f6368">0 s</text>\
            <text x="\(width - 80)" y="14" font-size="11" fill="#5f6368" text-anchor="end">\
            \(String(format: "%.3f", span)) s</text>

            """
        for (index, step) in steps.enumerated() {
            let y = 24 + index * 22
            svg += """
                <text x="0" y="\(y + 13)" font-size="12">\(Html.escape(String(step.id.prefix(24))))</text>
                """
            if let started = step.started {
                let x = left + started.timeIntervalSince(first) * scale
                let length = max(2, duration(step) * scale)
                svg += """
                    <rect class="bar \(step.state.rawValue)" x="\(Int(x))" y="\(y + 2)" width="\(Int(length))" \
                    height="14" fill="\(Self.colours[step.state] ?? "#9aa0a6")"><title>\
                    \(Html.escape("\(step.id): \(String(format: "%.3f", duration(step))) s, \(step.attempts) attempt(s)"))\
                    </title></rect><text x="\(Int(x + length) + 4)" y="\(y + 13)" font-size="10">\
                    \(String(format: "%.3f", duration(step))) s\(step.attempts > 1 ? " ×\(step.attempts)" : "")</text>

                    """
            }
        }
        return svg + "</svg>"
    }
}

/// HTML escaping: every text the inspector shows goes through it.
enum Html {
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
