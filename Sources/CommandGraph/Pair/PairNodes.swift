import CommandCore

/// The state of a two-input node (`zip(a, b)`, `combineLatest(a, b)`), not generic: its values live
/// in two ``RawRing``s and its flags in a lock, so the per-value path of the unspecialised generic
/// node looks no metadata up (a generic state would cost a look-up per value in the runtime's hash
/// table; the general many-input nodes pay several).
///
/// Values are sent to the node's result *while the lock is held*, which keeps the order in which
/// values were paired even when the two inputs deliver on different threads. No user code runs
/// under it: a value reaches the node only through an `.immediate` delivery, which always runs with
/// the thread's delivery trampoline running, and the sends are made inside `Trampoline.queueing`, so
/// the node's own observers are queued there, not called in place.
final class PairState: @unchecked Sendable {
    // `@unchecked Sendable`: every field but the rings' element types is guarded by `lock`; the
    // rings are touched only inside `lock.withLock`.
    struct Flags {
        var leftCompleted = false
        var rightCompleted = false
        var finished = false
    }

    let lock = Locked(Flags())
    let left: RawRing
    let right: RawRing

    init<A: Sendable, B: Sendable>(_: A.Type, _: B.Type) {
        left = RawRing(of: A.self)
        right = RawRing(of: B.self)
    }
}

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

    typealias PairFlags = PairState.Flags

    /// An input's terminal event: completion marks it and ends the node when `isDone` says so; a
    /// failure fails the node; a cancelled input cancels it, naming the input.
    private static func pairTerminal<Input>(
        _ event: CommandEvent<Input>, from input: Command<Input>, left: Bool, state: PairState, link: Link<Output>,
        isDone: (PairFlags) -> Bool
    ) {
        let emission = state.lock.withLock { flags -> Emission<Output>? in
            if flags.finished { return nil }
            switch event {
            case .value: return nil
            case .completed:
                if left { flags.leftCompleted = true } else { flags.rightCompleted = true }
                guard isDone(flags) else { return nil }
                flags.finished = true
                return .completed
            case .failed(let error):
                flags.finished = true
                return .failed(error)
            case .cancelled:
                flags.finished = true
                return .cancelled(link.inputCancelled(input.displayName))
            }
        }
        if let emission { link.emit(emission) }
    }
}
