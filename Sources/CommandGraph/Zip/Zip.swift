import CommandCore

extension Command {
    static func zipNode<Element: Sendable>(
        _ inputs: [NaryInput<Element>], output: @escaping @Sendable ([Element]) throws -> Output
    ) -> Command<Output> {
        typealias Machine = ZipStateMachine<Element>
        @Sendable func perform(_ action: Machine.Action, _ link: Link<Output>) {
            switch action {
            case .none: break
            case .emit(let pairs, let complete):
                for pair in pairs { link.enqueue(.computed { try output(pair) }) }
                if complete { link.enqueue(.completed) }
            case .complete: link.enqueue(.completed)
            case .fail(let error): link.enqueue(.failed(error))
            case .cancelled(let index): link.enqueue(.cancelled(link.inputCancelled(index, of: inputs)))
            }
        }
        return nary("zip", inputs: inputs, machine: { Machine(inputs: inputs.count) }, perform: perform)
    }

    /// Pairs the values of `inputs` in order (the n-th of each together).
    ///
    /// *Emits:* when every input has an unpaired value, the oldest of each, in input order.
    /// *Completes:* as soon as an input has completed and all its values were paired (leftovers of the
    /// others are dropped and the live inputs cancelled). *Fails:* on the first input failure.
    /// *Cancels:* the inputs no other consumer needs, when the node ends or is cancelled; an input
    /// cancelled ends the node cancelled, naming it. An empty array completes at once.
    /// - Complexity: O(inputs) per pair; buffers are unbounded (a fast input waits for slow ones).
    public static func zip(_ inputs: [Command<Output>]) -> Command<[Output]> {
        Command<[Output]>.zipNode(inputs.map { NaryInput($0) }, output: { $0 })
    }

    /// This command's values paired with `other`'s; see `Command.zip(_:)`.
    public func zip<Other: Sendable>(_ other: Command<Other>) -> Command<(Output, Other)> {
        CommandGraph.zip(self, other)
    }
}

/// Pairs the values of two typed inputs into tuples: `zip(a, b)` is a `Command<(A, B)>`. Rules as
/// `Command.zip(_:)`; the common case, with a state of its own that costs no metadata look-up and no
/// allocation per pair (the any-arity form erases and rebuilds each tuple).
public func zip<A: Sendable, B: Sendable>(_ a: Command<A>, _ b: Command<B>) -> Command<(A, B)> {
    Command<(A, B)>.zipPair(a, b)
}

/// Pairs the values of typed inputs into tuples: `zip(a, b, c)` is a `Command<(A, B, C)>`. Rules as
/// `Command.zip(_:)`.
public func zip<each Value: Sendable>(_ inputs: repeat Command<each Value>) -> Command<(repeat each Value)> {
    var erased: [NaryInput<any Sendable>] = []
    for input in repeat each inputs { erased.append(NaryInput(input) { $0 }) }
    return Command<(repeat each Value)>.zipNode(erased) { values in
        var reader = PackReader(values)
        return (repeat reader.next((each Value).self))
    }
}
