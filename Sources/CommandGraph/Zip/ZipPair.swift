import CommandCore

extension Command {
    /// `zip(a, b)`: rules as `Command.zip(_:)`, two typed inputs, no erasure.
    static func zipPair<A: Sendable, B: Sendable>(_ a: Command<A>, _ b: Command<B>) -> Command<Output>
    where Output == (A, B) {
        combinator("zip", inputs: [a, b]) { [unowned(unsafe) a, unowned(unsafe) b] link in
            // `unowned(unsafe)`: the node keeps its inputs alive until it ends (`retain(inputs:)`).
            let state = PairState(A.self, B.self)
            /// Whether an input that completed with an empty buffer ends the pairing.
            @Sendable func isDone(_ flags: Command<Output>.PairFlags) -> Bool {
                (flags.leftCompleted && state.left.count == 0) || (flags.rightCompleted && state.right.count == 0)
            }
            link.subscribe(
                a,
                value: { value in
                    let done = Trampoline.queueing {
                        state.lock.withLock { flags -> Bool in
                            if flags.finished { return false }
                            if state.right.count == 0 {
                                state.left.push(value)
                                return false
                            }
                            link.send((value, state.right.popFirst(as: B.self)))
                            if isDone(flags) { flags.finished = true }
                            return flags.finished
                        }
                    }
                    if done { link.emit(.completed) }
                },
                terminal: { event in pairTerminal(event, from: a, left: true, state: state, link: link, isDone: isDone)
                })
            link.subscribe(
                b,
                value: { value in
                    let done = Trampoline.queueing {
                        state.lock.withLock { flags -> Bool in
                            if flags.finished { return false }
                            if state.left.count == 0 {
                                state.right.push(value)
                                return false
                            }
                            link.send((state.left.popFirst(as: A.self), value))
                            if isDone(flags) { flags.finished = true }
                            return flags.finished
                        }
                    }
                    if done { link.emit(.completed) }
                },
                terminal: { event in pairTerminal(event, from: b, left: false, state: state, link: link, isDone: isDone)
                })
        }
    }
}
