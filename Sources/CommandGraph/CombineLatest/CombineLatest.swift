import CommandCore

extension Command {
    /// The node behind every `combineLatest` form: `output` turns the latest values into the node's
    /// value (outside every lock, in emission order).
    static func combineLatestNode<Element: Sendable>(
        _ inputs: [NaryInput<Element>], output: @escaping @Sendable ([Element]) throws -> Output
    ) -> Command<Output> {
        typealias Machine = CombineLatestStateMachine<Element>
        @Sendable func perform(_ action: Machine.Action, _ link: Link<Output>) {
            switch action {
            case .none: break
            case .emit(let values): link.enqueue(.computed { try output(values) })
            case .complete: link.enqueue(.completed)
            case .fail(let error): link.enqueue(.failed(error))
            case .cancelled(let index): link.enqueue(.cancelled(link.inputCancelled(index, of: inputs)))
            }
        }
        return nary("combineLatest", inputs: inputs, machine: { Machine(inputs: inputs.count) }, perform: perform)
    }

    /// Combines the latest values of `inputs` (ReactiveCocoa's `combineLatest:`).
    ///
    /// *Emits:* once every input has sent a value, the latest value of each, in input order, each
    /// time any input sends. An input that completed keeps supplying its last value.
    /// *Completes:* when every input completed (with no value at all if one completed without sending).
    /// *Fails:* on the first input failure. *Cancels:* the inputs no other consumer needs, when the
    /// node fails, is cancelled, or an input is cancelled (the node then ends cancelled, naming it).
    /// An empty array completes at once.
    /// - Complexity: O(inputs) per value.
    public static func combineLatest(_ inputs: [Command<Output>]) -> Command<[Output]> where Output: Sendable {
        Command<[Output]>.combineLatestNode(inputs.map { NaryInput($0) }, output: { $0 })
    }

    /// `combineLatest` with a `reduce` closure (the original's `combineLatest:reduce:`): emits
    /// `reduce(latest values)`; a throw fails the node. See `Command.combineLatest(_:)`.
    public static func combineLatest<Element: Sendable>(
        _ inputs: [Command<Element>], reduce: @escaping @Sendable ([Element]) throws -> Output
    ) -> Command<Output> {
        combineLatestNode(inputs.map { NaryInput($0) }, output: reduce)
    }

    /// This command's latest value with `other`'s; see `Command.combineLatest(_:)`.
    public func combineLatest<Other: Sendable>(_ other: Command<Other>) -> Command<(Output, Other)> {
        CommandGraph.combineLatest(self, other)
    }
}

/// Combines the latest values of two typed inputs: `combineLatest(a, b)` is a `Command<(A, B)>`. Rules
/// as `Command.combineLatest(_:)`; the common case, with a state of its own that costs no metadata
/// look-up and no allocation per value.
public func combineLatest<A: Sendable, B: Sendable>(_ a: Command<A>, _ b: Command<B>) -> Command<(A, B)> {
    Command<(A, B)>.combineLatestPair(a, b)
}

/// Combines the latest values of typed inputs into a tuple: `combineLatest(a, b, c)` is a
/// `Command<(A, B, C)>`. Rules as `Command.combineLatest(_:)`.
public func combineLatest<each Value: Sendable>(
    _ inputs: repeat Command<each Value>
) -> Command<(repeat each Value)> {
    var erased: [NaryInput<any Sendable>] = []
    for input in repeat each inputs { erased.append(NaryInput(input) { $0 }) }
    return Command<(repeat each Value)>.combineLatestNode(erased) { values in
        var reader = PackReader(values)
        return (repeat reader.next((each Value).self))
    }
}

/// Combines the latest values of typed inputs through `reduce` (the original's
/// `combineLatest:reduce:`): `combineLatest(a, b) { $0 + $1 }`. Rules as `Command.combineLatest(_:)`.
public func combineLatest<each Value: Sendable, Output: Sendable>(
    _ inputs: repeat Command<each Value>, reduce: @escaping @Sendable (repeat each Value) throws -> Output
) -> Command<Output> {
    var erased: [NaryInput<any Sendable>] = []
    for input in repeat each inputs { erased.append(NaryInput(input) { $0 }) }
    return Command<Output>.combineLatestNode(erased) { values in
        var reader = PackReader(values)
        return try reduce(repeat reader.next((each Value).self))
    }
}
