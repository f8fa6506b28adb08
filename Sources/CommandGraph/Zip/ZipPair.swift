import CommandCore

extension Command {
    /// `zip(a, b)`: rules as `Command.zip(_:)` (``PairStateMachine``), two typed inputs, no erasure.
    static func zipPair<A: Sendable, B: Sendable>(_ a: Command<A>, _ b: Command<B>) -> Command<Output>
    where Output == (A, B) {
        combinator("zip", inputs: [a, b]) { [unowned(unsafe) a, unowned(unsafe) b] link in
            // `unowned(unsafe)`: the node keeps its inputs alive until it ends (`retain(inputs:)`).
            let state = PairState(.zip, A.self, B.self)
            link.subscribe(
                a,
                value: { value in
                    let complete = state.value(
                        from: .left, keep: { state.left.push(value) },
                        pair: { link.send((value, state.right.popFirst(as: B.self))) })
                    if complete { link.complete() }
                },
                terminal: { event in pairTerminal(event, from: a, side: .left, state: state, link: link) })
            link.subscribe(
                b,
                value: { value in
                    let complete = state.value(
                        from: .right, keep: { state.right.push(value) },
                        pair: { link.send((state.left.popFirst(as: A.self), value)) })
                    if complete { link.complete() }
                },
                terminal: { event in pairTerminal(event, from: b, side: .right, state: state, link: link) })
        }
    }
}
