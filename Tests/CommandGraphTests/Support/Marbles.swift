import CommandCore
import CommandGraph

/// Marble diagrams for combinator tests, on a virtual clock.
///
/// A diagram is one character per tick: `-` nothing, `|` completion, `#` failure (with
/// ``MarbleError``), `x` cancellation (in output diagrams), `(ab)` several events in one tick, any other
/// character a value (that character, as a `String`). Spaces are ignored. In output diagrams a value
/// longer than one character is shown in braces: `{ax}`.
///
/// ```swift
/// let marbles = Marbles()
/// let a = marbles.input("-a-b-|")
/// let b = marbles.input("-x--y|")
/// #expect(marbles.run(combineLatest(a, b).map { $0 + $1 }) == "-{ax}-{bx}{by}|")
/// ```
///
/// `run` executes the graph in the library's inline test mode: every command runs at once on the
/// test's thread when it becomes ready, so nothing waits and the result is deterministic.
public final class Marbles: Sendable {
    public let scheduler = VirtualScheduler()
    public let tick: Duration = .milliseconds(10)

    public init() {}

    /// A cold input: its events are scheduled relative to when it starts running.
    public func input(_ diagram: String, name: String? = nil) -> Command<String> {
        let events = Self.parse(diagram)
        let scheduler = self.scheduler
        let tick = self.tick
        let command = Command<String> { result in
            let tokens = CompoundCancelable()
            for (index, symbols) in events {
                for symbol in symbols {
                    tokens.add(
                        scheduler.schedule(after: tick * index) {
                            switch symbol {
                            case "|": result.complete()
                            case "#": result.fail(MarbleError(diagram: diagram))
                            default: result.send(String(symbol))
                            }
                        })
                }
            }
            return tokens
        }
        command.name = name ?? "marble(\(diagram))"
        return command
    }

    /// Executes `output`, advances the clock `ticks` ticks (cancelling the output at tick `cancelAt`,
    /// after that tick's events),
    /// and returns what it emitted as a diagram.
    public func run(_ output: Command<String>, ticks: Int = 40, cancelAt: Int? = nil) -> String {
        let recorded = Locked<[(Int, String)]>([])
        let scheduler = self.scheduler
        let tick = self.tick
        InlineExecution.$isOn.withValue(true) {
            output.execute(on: .immediate) { event in
                let now = scheduler.now
                let index = Int(now / tick)
                let symbol: String
                switch event {
                case .value(let value): symbol = value
                case .completed: symbol = "|"
                case .failed: symbol = "#"
                case .cancelled: symbol = "x"
                }
                recorded.withLock { $0.append((index, symbol)) }
            }
            scheduler.advance(by: .zero)
            if cancelAt == 0 { output.cancel() }
            for index in 1...ticks {
                scheduler.advance(by: tick)
                if index == cancelAt { output.cancel() }
            }
        }
        return Self.render(recorded.withLock { $0 })
    }

    static func parse(_ diagram: String) -> [(Int, [Character])] {
        var events: [(Int, [Character])] = []
        var index = 0
        var group: [Character]?
        for character in diagram where character != " " {
            switch character {
            case "(": group = []
            case ")":
                if let symbols = group { events.append((index, symbols)) }
                group = nil
                index += 1
            case "-":
                index += 1
            default:
                if group != nil {
                    group!.append(character)
                } else {
                    events.append((index, [character]))
                    index += 1
                }
            }
        }
        return events
    }

    static func render(_ events: [(Int, String)]) -> String {
        guard let last = events.map(\.0).max() else { return "" }
        var diagram = ""
        for index in 0...last {
            // A value longer than one character is shown in braces: `{ax}`.
            let symbols = events.filter { $0.0 == index }.map { $0.1.count > 1 ? "{\($0.1)}" : $0.1 }
            switch symbols.count {
            case 0: diagram += "-"
            case 1: diagram += symbols[0]
            default: diagram += "(" + symbols.joined() + ")"
            }
        }
        return diagram
    }
}

/// The failure of a `#` in a marble diagram.
public struct MarbleError: Error, Equatable {
    public let diagram: String
}
