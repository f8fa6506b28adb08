import Foundation

// An observer as the command keeps it, and what the delivery half of the state machine returns.

/// What an observer is given, as passed to `attach` (only there: the record keeps a ``SinkBox``).
enum ObserverSink<Output: Sendable>: Sendable {
    case events(@Sendable (CommandEvent<Output>) -> Void)
    case states(@Sendable (CommandState) -> Void)
    /// A combinator's fast path: values as they are, the terminal event as an event.
    case values(@Sendable (Output) -> Void, terminal: @Sendable (CommandEvent<Output>) -> Void)
}

/// An events observer's handlers, boxed so that ``ObserverRecord`` is not generic: the records are
/// read and written on every value, and a generic record (`ObserverRecord<Output>`) costs a metadata
/// look-up in the runtime's hash table on each access from the unspecialised `Command<Output>` (three
/// per value per stage in a `map` chain, measured with callgrind). The box is cast back with
/// `unsafeDowncast` by the command that made it, which knows its `Output`, for a record of kind
/// `.events` (a `.states` record holds a ``StateSinkBox``). 49 bytes, a 64-byte block (80 while it
/// kept a state handler too, always nil here).
final class SinkBox<Output: Sendable>: Sendable {
    /// Every event (`execute`, `observe`).
    let events: (@Sendable (CommandEvent<Output>) -> Void)?
    /// Values only, for a combinator consuming this command (when `hasValues`); `events` then gets
    /// only the terminal. Not optional: calling a `let` closure of the box borrows it, where an
    /// optional's binding copied it (a retain and a release of its context per value).
    let values: @Sendable (Output) -> Void
    let hasValues: Bool

    init(
        events: (@Sendable (CommandEvent<Output>) -> Void)?, values: @escaping @Sendable (Output) -> Void,
        hasValues: Bool
    ) {
        (self.events, self.values, self.hasValues) = (events, values, hasValues)
    }

    /// The box `sink` needs: a ``SinkBox`` for events, a ``StateSinkBox`` for state changes.
    static func make(_ sink: ObserverSink<Output>) -> any AnyObject & Sendable {
        switch sink {
        case .events(let handler): SinkBox(events: handler, values: { _ in }, hasValues: false)
        case .values(let handler, let terminal): SinkBox(events: terminal, values: handler, hasValues: true)
        case .states(let handler): StateSinkBox(handler)
        }
    }

    /// Delivers a value: to the value handler, else as an event.
    @inline(__always)
    func deliver(_ value: Output) {
        if hasValues { values(value) } else { deliverAsEvent(value) }
    }

    /// Out of line, so the value path does not fetch `CommandEvent<Output>`'s metadata.
    @inline(never)
    func deliverAsEvent(_ value: Output) { events?(.value(value)) }

    /// The terminal event; out of line for the same reason.
    @inline(never)
    func deliver(_ outcome: Termination) { events?(outcome.event()) }
}

/// A state observer's handler (the sink of a record of kind `.states`): not generic.
final class StateSinkBox: Sendable {
    let handler: @Sendable (CommandState) -> Void

    init(_ handler: @escaping @Sendable (CommandState) -> Void) { self.handler = handler }
}

/// What a drain delivers next. Not generic, and not nested in the generic state machine (which would
/// make it generic: a metadata look-up per value; see ``SinkBox``): a value is moved into the drain's
/// slot instead of carried here.
enum Delivery {
    /// The value now in the slot, for the ``SinkBox`` `box`; `more`: something else already waits
    /// for this observer.
    case value(box: AnyObject, more: Bool)
    case terminal(Termination, box: AnyObject)
    case state(CommandState, box: AnyObject)
    /// Nothing left: the drain stops (and the observer is no longer scheduled).
    case idle
}

/// One observer of a command: where its callbacks run, what it wants and how far it got.
struct ObserverRecord: Sendable {
    /// Events (values and the terminal event) or state changes.
    enum Kind: Sendable { case events, states }

    // The one-byte fields last, together, then the list's count (40 bytes a record; `StateLayoutTests`
    // checks it).
    let id: UInt64
    let context: CallbackContext
    /// A ``SinkBox`` of the command's `Output`.
    let sink: any AnyObject & Sendable
    /// Absolute index in the value log of the next value to deliver.
    var cursor: Int
    let kind: Kind
    /// A drain is scheduled or running on `context`; at most one at a time, which is what keeps
    /// deliveries ordered and never overlapping.
    var scheduled = false
    /// For state observers: `.executing` was delivered.
    var sentExecuting = false
    /// In a list's first record, the list's count (see ``ObserverList``); in the others, nothing. In
    /// the record's padding: no byte more.
    fileprivate(set) var listCount: UInt32 = 0

    init(id: UInt64, context: CallbackContext, kind: Kind, sink: any AnyObject & Sendable, cursor: Int) {
        (self.id, self.context, self.kind, self.sink, self.cursor) = (id, context, kind, sink, cursor)
    }
}

/// A command's observers' records, in one buffer with no array header: the count kept in the first
/// record's spare bytes (``ObserverRecord/listCount``), the room asked of the allocator
/// (``ManagedBuffer/capacity``) when an append needs it. One observer's records are a 64-byte block
/// (16 + 40 bytes asked for), where an `Array`'s 32-byte header made it 80: 16 bytes for every command
/// someone observes (each `execute`d leaf of a fan-out, each input of a combinator). Empty, it holds
/// no buffer: the last record's removal (an observer's terminal event) frees it.
///
/// A value, like the `Array` it replaces: a buffer another copy shares is copied before a write.
struct ObserverList {
    /// Nil while empty. `nonisolated(unsafe)` (a `ManagedBuffer` is not `Sendable`): written only
    /// through a list holding its only reference (copied first otherwise), so a copy sent elsewhere
    /// shares nothing that is written; the list lives in a command's state, under its lock.
    nonisolated(unsafe) private var buffer: ObserverBuffer?

    init() {}

    var isEmpty: Bool { buffer == nil }

    var count: Int {
        guard let buffer else { return 0 }
        return Int(buffer.records.pointee.listCount)
    }

    subscript(index: Int) -> ObserverRecord {
        get {
            precondition(index >= 0 && index < count, "ObserverList: index out of range")
            return buffer.unsafelyUnwrapped.records[index]
        }
        _modify {
            let count = self.count
            precondition(index >= 0 && index < count, "ObserverList: index out of range")
            makeUnique()
            let records = buffer.unsafelyUnwrapped.records
            yield &records[index]
            // A whole record written over the first keeps the list's count.
            records.pointee.listCount = UInt32(truncatingIfNeeded: count)
        }
    }

    /// Appends `record`: the first makes a buffer with room for one; a full one is replaced by one
    /// with twice the room.
    mutating func append(_ record: ObserverRecord) {
        let count = self.count
        if let old = buffer {
            let room = old.capacity
            if count == room || !isKnownUniquelyReferenced(&buffer) {
                buffer = ObserverBuffer.make(room: count == room ? 2 * room : room, copying: old, count: count)
            }
        } else {
            buffer = ObserverBuffer.make(room: 1, copying: nil, count: 0)
        }
        let records = buffer.unsafelyUnwrapped.records
        (records + count).initialize(to: record)
        records.pointee.listCount = UInt32(truncatingIfNeeded: count + 1)
    }

    /// Removes the record at `index`, keeping the order; the last one's removal frees the buffer.
    mutating func remove(at index: Int) {
        let count = self.count
        precondition(index >= 0 && index < count, "ObserverList: index out of range")
        if count == 1 {
            buffer = nil
            return
        }
        makeUnique()
        let records = buffer.unsafelyUnwrapped.records
        (records + index).deinitialize(count: 1)
        (records + index).moveInitialize(from: records + index + 1, count: count - index - 1)
        records.pointee.listCount = UInt32(truncatingIfNeeded: count - 1)
    }

    /// The record, read in place, when there is exactly one (a send's common case: one look at the
    /// buffer, where `count == 1` and `self[0]` each checked it).
    @inline(__always)
    var onlyRecord: UnsafePointer<ObserverRecord>? {
        guard let buffer else { return nil }
        let records = buffer.records
        return records.pointee.listCount == 1 ? UnsafePointer(records) : nil
    }

    /// `self[0].cursor = cursor` without the copy-on-write check (a call to the runtime and registers
    /// saved around it, on every value a kept stage sends): for a caller that knows the buffer is not
    /// shared (a command's state, in its lock: no function returns or keeps its `observers`). Debug
    /// builds check that it is not.
    @inline(__always)
    mutating func setFirstCursorUnshared(_ cursor: Int) {
        #if DEBUG
            precondition(
                isKnownUniquelyReferenced(&buffer),
                "CommandStateMachine: the observers' records were shared outside the lock")
        #endif
        buffer.unsafelyUnwrapped.records.pointee.cursor = cursor
    }

    /// The buffer, for tests of its size.
    func withBufferForTesting<Result>(_ body: (ObserverBuffer) -> Result) -> Result? { buffer.map(body) }

    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&buffer) {
            let old = buffer.unsafelyUnwrapped
            buffer = ObserverBuffer.make(room: old.capacity, copying: old, count: count)
        }
    }
}

/// ``ObserverList``'s buffer: the records from its start, as many as the first one's `listCount`.
final class ObserverBuffer: ManagedBuffer<Void, ObserverRecord> {
    /// A buffer with room for at least `room` records, holding copies of the first `count` of
    /// `source`'s (its count in the first, copied with it).
    static func make(room: Int, copying source: ObserverBuffer?, count: Int) -> ObserverBuffer {
        let buffer = unsafeDowncast(create(minimumCapacity: room) { _ in }, to: ObserverBuffer.self)
        if let source { buffer.records.initialize(from: source.records, count: count) }
        return buffer
    }

    /// The records' address, valid while the buffer lives.
    var records: UnsafeMutablePointer<ObserverRecord> { withUnsafeMutablePointerToElements { $0 } }

    deinit {
        // Never empty: an empty list holds no buffer.
        let records = self.records
        records.deinitialize(count: Int(records.pointee.listCount))
    }
}

/// A drain to schedule: the observer and its context (an `.immediate` one goes through the thread's
/// trampoline with the command itself: scheduling allocates nothing per value).
struct Wakeup: Sendable {
    let observer: UInt64
    let context: CallbackContext
}

/// An observer claimed for a value as it was sent, to be delivered in place (see
/// `CommandStateMachine.send(_:claimInPlace:word:wakeups:claim:)`); its id and its ``SinkBox``, not
/// retained: the observer's record holds the box, and a record removed while claimed leaves its box
/// in ``RareFields/retiredSinks`` until the claim's idle mark (no retain and release per value).
struct InPlaceClaim {
    let observer: UInt64
    let box: Unmanaged<AnyObject>
    /// Claimed in the lock's ``ClaimWord``: released without the lock when nothing poked it.
    let lockFree: Bool
}

/// The drains to schedule after a change: the first inline, so waking one observer (the common
/// case: a stage of a chain) allocates nothing.
typealias Wakeups = SmallList<Wakeup>
