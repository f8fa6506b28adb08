import CommandCore

/// The rules of a two-input node (`zip(a, b)`, `combineLatest(a, b)`) as a plain value, tested without
/// threads: it counts what each side holds and decides, event by event, what the node does. The values
/// themselves wait in ``PairState``'s rings, which the node moves as the action says.
///
/// - `zip`: a value pairs with the other side's oldest waiting value (first in, first out), or waits;
///   the node completes as soon as a side has completed with nothing waiting (checked after each
///   pairing too).
/// - `combineLatest` (ReactiveCocoa's): a value replaces its side's latest and pairs with the other
///   side's latest once both have sent; the node completes when both completed.
/// - Both: the first failure fails the node; a cancelled input ends it cancelled, naming the input;
///   after the end, every event is dropped.
struct PairStateMachine: Sendable, Equatable {
    enum Rule: Sendable, Equatable {
        case zip
        case combineLatest
    }

    enum Side: Sendable, Equatable {
        case left
        case right
    }

    /// What to do with a value.
    enum ValueAction: Sendable, Equatable {
        /// The node ended: drop it.
        case drop
        /// Keep it on its side: appended (`zip`), or as the latest, replacing the one kept (`combineLatest`).
        case keep
        /// Send it with the other side's oldest (`zip`, which takes that one) or latest
        /// (`combineLatest`, which also keeps it as its side's latest); then complete if `complete`.
        case pair(complete: Bool)
    }

    /// What to do with an input's end.
    enum EndAction: Sendable, Equatable {
        case none
        case complete
        case fail
        case cancel
    }

    let rule: Rule
    private(set) var leftCount = 0
    private(set) var rightCount = 0
    private(set) var leftCompleted = false
    private(set) var rightCompleted = false
    private(set) var finished = false

    init(_ rule: Rule) { self.rule = rule }

    @inline(__always)
    mutating func value(from side: Side) -> ValueAction {
        if finished { return .drop }
        let other = side == .left ? rightCount : leftCount
        switch rule {
        case .zip:
            guard other > 0 else {
                if side == .left { leftCount += 1 } else { rightCount += 1 }
                return .keep
            }
            if side == .left { rightCount -= 1 } else { leftCount -= 1 }
            let done = zipDone
            if done { finished = true }
            return .pair(complete: done)
        case .combineLatest:
            if side == .left { leftCount = 1 } else { rightCount = 1 }
            return other > 0 ? .pair(complete: false) : .keep
        }
    }

    mutating func completed(_ side: Side) -> EndAction {
        if finished { return .none }
        if side == .left { leftCompleted = true } else { rightCompleted = true }
        let done = rule == .zip ? zipDone : leftCompleted && rightCompleted
        guard done else { return .none }
        finished = true
        return .complete
    }

    mutating func failed() -> EndAction {
        if finished { return .none }
        finished = true
        return .fail
    }

    mutating func cancelled() -> EndAction {
        if finished { return .none }
        finished = true
        return .cancel
    }

    /// A side that completed with nothing waiting can pair no more.
    private var zipDone: Bool { (leftCompleted && leftCount == 0) || (rightCompleted && rightCount == 0) }
}

/// The state of a two-input node: its ``PairStateMachine`` under a lock, and its values in two
/// ``RawRing``s (not generic, so the per-value path of the unspecialised generic node looks no
/// metadata up; a generic state would cost a look-up per value in the runtime's hash table, as the
/// general many-input nodes pay).
///
/// A pair is sent to the node's result *while the lock is held*: that is what keeps pairs in the order
/// they were made when the two inputs deliver on different threads (sending after unlocking would need
/// the outbox of the many-input nodes, three more lock rounds and an `Emission` per value). No user code
/// runs under it: a value reaches the node only through an `.immediate` delivery, which always runs with
/// the thread's delivery trampoline running, and the sends are made inside `Trampoline.queueing`, so the
/// node's own observers are queued there, not called in place. Ends are emitted after unlocking.
final class PairState: @unchecked Sendable {
    // `@unchecked Sendable`: the machine is guarded by `lock`; the rings are touched only inside
    // `lock.withLock`.
    let lock: Locked<PairStateMachine>
    let left: RawRing
    let right: RawRing

    init<A: Sendable, B: Sendable>(_ rule: PairStateMachine.Rule, _: A.Type, _: B.Type) {
        lock = Locked(PairStateMachine(rule))
        left = RawRing(of: A.self)
        right = RawRing(of: B.self)
    }

    /// A value of one side: the machine decides; `keep` stores the value, `pair` sends the pair (under
    /// the lock, inside `Trampoline.queueing`: see above). True when the node completes after it (the
    /// caller emits the completion, after unlocking). Not generic: no metadata is looked up per value.
    @inline(__always)
    func value(from side: PairStateMachine.Side, keep: () -> Void, pair: () -> Void) -> Bool {
        Trampoline.queueing {
            lock.withLock { machine -> Bool in
                switch machine.value(from: side) {
                case .drop: return false
                case .keep:
                    keep()
                    return false
                case .pair(let complete):
                    pair()
                    return complete
                }
            }
        }
    }
}

extension Command {
    /// An input's terminal event: the machine decides; the end is emitted after unlocking.
    static func pairTerminal<Input>(
        _ event: CommandEvent<Input>, from input: Command<Input>, side: PairStateMachine.Side, state: PairState,
        link: Link<Output>
    ) {
        let action = state.lock.withLock { machine -> PairStateMachine.EndAction in
            switch event {
            case .value: return .none  // values come through the value path
            case .completed: return machine.completed(side)
            case .failed: return machine.failed()
            case .cancelled: return machine.cancelled()
            }
        }
        switch action {
        case .none: break
        case .complete: link.emit(.completed)
        case .fail: if case .failed(let error) = event { link.emit(.failed(error)) }
        case .cancel: link.emit(.cancelled(link.inputCancelled(input.displayName)))
        }
    }
}
