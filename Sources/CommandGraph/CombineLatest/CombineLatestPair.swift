import CommandCore

extension Command {
    /// `combineLatest(a, b)`: rules as `Command.combineLatest(_:)` (``PairStateMachine``), two typed
    /// inputs, no erasure.
    static func combineLatestPair<A: Sendable, B: Sendable>(_ a: Command<A>, _ b: Command<B>) -> Command<Output>
    where Output == (A, B) {
        combinator("combineLatest", inputs: [a, b]) { [unowned(unsafe) a, unowned(unsafe) b] link in
            // `unowned(unsafe)`: as in `zipPair`. Each ring holds at most the latest value.
            let state = PairState(.combineLatest, A.self, B.self)
            link.subscribe(
                a,
                value: { value in
                    // A value never completes combineLatest (both inputs' completions do).
                    _ = state.value(
                        from: .left,
                        keep: {
                            if state.left.count > 0 { _ = state.left.popFirst(as: A.self) }
                            state.left.push(value)
                        },
                        pair: {
                            if state.left.count > 0 { _ = state.left.popFirst(as: A.self) }
                            state.left.push(value)
                            link.send((value, state.right.first(as: B.self)))
                        })
                },
                terminal: { event in pairTerminal(event, from: a, side: .left, state: state, link: link) })
            link.subscribe(
                b,
                value: { value in
                    // A value never completes combineLatest (both inputs' completions do).
                    _ = state.value(
                        from: .right,
                        keep: {
                            if state.right.count > 0 { _ = state.right.popFirst(as: B.self) }
                            state.right.push(value)
                        },
                        pair: {
                            if state.right.count > 0 { _ = state.right.popFirst(as: B.self) }
                            state.right.push(value)
                            link.send((state.left.first(as: A.self), value))
                        })
                },
                terminal: { event in pairTerminal(event, from: b, side: .right, state: state, link: link) })
        }
    }
}
