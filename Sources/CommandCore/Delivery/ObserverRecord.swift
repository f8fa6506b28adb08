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

    // The one-byte fields last, together (40 bytes a record; `StateLayoutTests` checks it).
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

    init(id: UInt64, context: CallbackContext, kind: Kind, sink: any AnyObject & Sendable, cursor: Int) {
        (self.id, self.context, self.kind, self.sink, self.cursor) = (id, context, kind, sink, cursor)
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
