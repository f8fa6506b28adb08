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
    typealias PairFlags = PairState.Flags

    /// An input's terminal event: completion marks it and ends the node when `isDone` says so; a
    /// failure fails the node; a cancelled input cancels it, naming the input.
    static func pairTerminal<Input>(
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
