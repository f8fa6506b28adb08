import CommandCore

extension Command {
    /// `combineLatest(a, b)`: rules as `Command.combineLatest(_:)`, two typed inputs, no erasure.
    static func combineLatestPair<A: Sendable, B: Sendable>(_ a: Command<A>, _ b: Command<B>) -> Command<Output>
    where Output == (A, B) {
        combinator("combineLatest", inputs: [a, b]) { [unowned(unsafe) a, unowned(unsafe) b] link in
            // `unowned(unsafe)`: as in `zipPair`. Each ring holds at most the latest value.
            let state = PairState(A.self, B.self)
            @Sendable func isDone(_ flags: Command<Output>.PairFlags) -> Bool {
                flags.leftCompleted && flags.rightCompleted
            }
            link.subscribe(
                a,
                value: { value in
                    Trampoline.queueing {
                        state.lock.withLock { flags in
                            if flags.finished { return }
                            if state.left.count > 0 { _ = state.left.popFirst(as: A.self) }
                            state.left.push(value)
                            if state.right.count > 0 { link.send((value, state.right.first(as: B.self))) }
                        }
                    }
                },
                terminal: { event in pairTerminal(event, from: a, left: true, state: state, link: link, isDone: isDone)
                })
            link.subscribe(
                b,
                value: { value in
                    Trampoline.queueing {
                        state.lock.withLock { flags in
                            if flags.finished { return }
                            if state.right.count > 0 { _ = state.right.popFirst(as: B.self) }
                            state.right.push(value)
                            if state.left.count > 0 { link.send((state.left.first(as: A.self), value)) }
                        }
                    }
                },
                terminal: { event in pairTerminal(event, from: b, left: false, state: state, link: link, isDone: isDone)
                })
        }
    }
}
