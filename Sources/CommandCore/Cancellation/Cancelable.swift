/// Something that can be cancelled once: a running command, a timer, a network request.
///
/// `cancel()` may be called from any thread, any number of times; only the first call has an effect.
/// `isCancelled` turns true when that first call begins and never turns false again.
///
/// A ``Command`` is itself a `Cancelable` (through `Operation.cancel()`), and so is what
/// ``Command/execute(on:_:)-(_,(CommandEvent<Output>)->Void)`` returns.
public protocol Cancelable: AnyObject, Sendable {
    /// Cancels; idempotent.
    func cancel()
    /// True once `cancel()` was called.
    var isCancelled: Bool { get }
}

extension Cancelable {
    /// Keeps this cancelable in `bag`, which cancels it when the bag is released (or cancelled).
    ///
    /// This is the original library's automatic cancel: store the token of a command in a bag owned by
    /// a view model or a controller, and the command is cancelled when its owner goes away.
    public func store(in bag: CancelBag) {
        bag.insert(self)
    }
}

/// A cancelable that runs a block once, on the first `cancel()`, on the thread that called it.
///
/// The block is released right after it ran, so whatever it captured is freed.
public final class BlockCancelable: Cancelable {
    private struct State {
        var block: (@Sendable () -> Void)?
        var isCancelled = false
    }

    // Guards the block (nil once taken) and the flag.
    private let state: Locked<State>

    /// Creates a cancelable running `block` on the first `cancel()`.
    public init(_ block: @escaping @Sendable () -> Void) {
        state = Locked(State(block: block))
    }

    /// Runs the block if this is the first call; the block runs outside any lock.
    public func cancel() {
        let block = state.withLock { state -> (@Sendable () -> Void)? in
            state.isCancelled = true
            defer { state.block = nil }
            return state.block
        }
        block?()
    }

    public var isCancelled: Bool { state.withLock { $0.isCancelled } }
}

/// A set of cancelables cancelled together.
///
/// Adding to a compound that is already cancelled cancels the added one at once, on the adding thread.
/// `cancel()` cancels every member once, outside the lock, in the order they were added.
public final class CompoundCancelable: Cancelable {
    private struct State {
        var isCancelled = false
        var members: [ObjectIdentifier: (order: Int, member: any Cancelable)] = [:]
        var nextOrder = 0
    }

    // Guards the member table and the cancelled flag.
    private let state = Locked(State())

    /// Creates a compound holding `members`.
    public init(_ members: [any Cancelable] = []) {
        for member in members { add(member) }
    }

    /// Adds `member`; cancels it at once if this compound was already cancelled.
    public func add(_ member: any Cancelable) {
        let cancelNow = state.withLock { state -> Bool in
            if state.isCancelled { return true }
            state.members[ObjectIdentifier(member)] = (state.nextOrder, member)
            state.nextOrder += 1
            return false
        }
        if cancelNow { member.cancel() }
    }

    /// Removes `member` without cancelling it.
    public func remove(_ member: any Cancelable) {
        _ = state.withLock { $0.members.removeValue(forKey: ObjectIdentifier(member)) }
    }

    /// The number of members still held.
    public var count: Int { state.withLock { $0.members.count } }

    public func cancel() {
        let members = state.withLock { state -> [any Cancelable] in
            if state.isCancelled { return [] }
            state.isCancelled = true
            defer { state.members = [:] }
            return state.members.values.sorted { $0.order < $1.order }.map(\.member)
        }
        for member in members { member.cancel() }
    }

    public var isCancelled: Bool { state.withLock { $0.isCancelled } }
}

/// Holds cancelables and cancels them when it is released: the original library's auto-cancel.
///
/// Give a bag to the object whose lifetime bounds the work (a view model, a controller, a session);
/// `token.store(in: bag)`. When the owner releases the bag, every stored cancelable is cancelled on the
/// releasing thread. `cancel()` does the same at once; a bag that was cancelled cancels what is stored
/// later immediately.
public final class CancelBag: Cancelable {
    private let compound = CompoundCancelable()

    public init() {}

    /// Stores `cancelable` until the bag is released or cancelled.
    public func insert(_ cancelable: any Cancelable) {
        compound.add(cancelable)
    }

    /// The number of cancelables held.
    public var count: Int { compound.count }

    public func cancel() { compound.cancel() }

    public var isCancelled: Bool { compound.isCancelled }

    deinit { compound.cancel() }
}
