import Foundation

/// The lock of a command's state.
extension OwnedLocked where Value == CommandStateMachine {
    /// `withLock`, with the in-place claim word, for the state's functions that touch its observers
    /// (they settle a claim first: see `CommandStateMachine.settleInPlaceClaim(_:)`).
    @inline(__always)
    func withLock<Result>(_ body: (inout CommandStateMachine, ClaimWord) throws -> Result) rethrows -> Result {
        try withLockAndClaimWord(body)
    }
}

// From a command to its observers: a value from the result sink, attaching an observer, scheduling
// its drain on its context, and the drain loop that delivers values and the terminal event one at a
// time, in order.
extension Command {
    /// A value from the result sink (`CommandResult.send`): appended to the log under the lock, then
    /// handed in place to an idle `.immediate` observer, or its drain scheduled.
    func receive(_ value: Output, quietly: Bool = false) {
        // An idle `.immediate` observer gets the value in place, claimed in the same lock as the send
        // (one lock round trip and one queue entry fewer per stage), when this thread may deliver now:
        // see `Trampoline.deliverNow(on:_:)`, which bounds the nesting.
        let trampoline = Trampoline.deliveriesQueue
        let inPlace = Trampoline.mayDeliverNow(trampoline)
        // Optional: a kept stage's send, which wakes nothing, destroys a nil, not an empty list (which
        // was two calls a value).
        var wakeups: Wakeups?
        var claim: InPlaceClaim?
        // The lock taken without a closure: `send`'s body compiles into this function (as a closure it
        // was a function of its own, called with registers saved around it). Nothing in `send` calls
        // user code or throws.
        let (state, word) = machine.acquire()
        let sent = state.pointee.send(value, claimInPlace: inPlace, word: word, wakeups: &wakeups, claim: &claim)
        machine.release()
        guard sent else {
            // After a cancel, a late send is the normal race with work that had not seen it: silent.
            if !quietly && !machine.withLock({ $0.isCancelled }) {
                diagnose(.alreadyFinished, "a value was sent after the terminal event (or before run); it is ignored.")
            }
            return
        }
        if let wakeups { schedule(wakeups) }
        if let claim {
            // `Trampoline.deliverNow(on:_:)` without its closure (which was a function of its own).
            let nested = Trampoline.beginDeliveryNow(on: trampoline)
            claim.box._withUnsafeGuaranteedRef { unsafeDowncast($0, to: SinkBox<Output>.self).deliver(value) }
            // Then the observer's idle mark: a claim in the word released without the lock unless
            // something poked it; else whatever arrived meanwhile, under the lock.
            if !claim.lockFree || !machine.claimWord.release() { drainInPlace(claim) }
            if !nested { Trampoline.endDeliveryNow(on: trampoline) }
        }
    }

    /// For combinators: observes this command `.immediate`ly as a counted consumer and executes it.
    /// Cancelling the returned subscription detaches the observer; the command itself is cancelled
    /// when its last consumer detached, unless someone executed it directly or it already ended.
    package func subscribe(_ handler: @escaping @Sendable (CommandEvent<Output>) -> Void) -> any Cancelable {
        subscribe(sink: .events(handler))
    }

    /// `subscribe` with values handed to `value` as they are (no event built per value: the fast path
    /// of single-input operators) and the terminal event to `terminal`.
    package func subscribe(
        value: @escaping @Sendable (Output) -> Void, terminal: @escaping @Sendable (CommandEvent<Output>) -> Void
    ) -> any Cancelable {
        subscribe(sink: .values(value, terminal: terminal))
    }

    private func subscribe(sink: ObserverSink<Output>) -> any Cancelable {
        let id = attach(context: .immediate, sink: sink, as: .consumer)
        executeGraph()
        return BlockCancelable { [self] in
            if machine.withLock({ $0.releaseConsumer(observer: id, word: $1) }) { cancel() }
        }
    }

    /// For combinators subscribing to a command chosen at run time (a `flatMap` inner): if it has
    /// finished (run and ended), hands its kept values to `value` and returns its terminal event, on
    /// this thread, without attaching an observer: what an `.immediate` observer attaching now would
    /// get (its replay, then the terminal event), for a tenth of the cost; the ending is returned as a
    /// ``Termination``, not a generic event (no metadata look-up). Nil if it has not finished
    /// (subscribe to it instead). The values are read from a copy of the log taken under the lock and
    /// handed over outside it. A ready-value command (`Command.just`, `.empty`, `.fail`) nothing else
    /// touched answers with its stored outcome without running: it stays pending (executing it later
    /// runs it as usual, with the same outcome).
    package func replayIfFinished(_ value: (Output) -> Void) -> Termination? {
        // One lock round for both answers: finished, or a ready value (`Command.just`) nothing else
        // touched, whose stored outcome is read without running it.
        // No generic tuple or optional around the log: each would cost a metadata look-up per call in
        // this unspecialised code.
        var log = ValueLog()
        var outcome: Termination?
        let ready = machine.withLock { machine -> Bool in
            if machine.isFinished, let ended = machine.outcome {
                log = machine.log
                outcome = ended
                return false
            }
            return machine.isUntouchedReadyValue
        }
        if ready { return readyOutcome(value) }
        guard let outcome else { return nil }
        var index = log.startIndex
        while index < log.endIndex {
            value(log.value(at: index, as: Output.self))
            index += 1
        }
        return outcome
    }

    @discardableResult
    func attach(
        context: CallbackContext, sink: ObserverSink<Output>,
        as attachment: CommandStateMachine.Attachment = .observer
    ) -> UInt64 {
        let (id, wakeup) = machine.withLock { machine in
            machine.addObserver(context: context, sink: sink, as: attachment)
        }
        if let wakeup { schedule(Wakeups(wakeup)) }
        return id
    }

    /// Schedules one drain per woken observer on its context.
    func schedule(_ wakeups: Wakeups) {
        guard let first = wakeups.first else { return }
        schedule(first)
        for wakeup in wakeups.rest { schedule(wakeup) }
    }

    private func schedule(_ wakeup: Wakeup) {
        if wakeup.context.isImmediate {
            // No closure made per value: the command (kept alive by the trampoline until it ran) and
            // the observer.
            Trampoline.deliveries.run(drain: self, wakeup.observer)
        } else {
            wakeup.context.schedule { [self] in drain(wakeup.observer, immediate: false) }
        }
    }

    /// Continues an `.immediate` observer's deliveries after one delivered in place, unless its claim
    /// in the word was released without the lock: marks it idle if nothing else arrived meanwhile
    /// (one lock), else drains what did.
    func drainInPlace(_ claim: InPlaceClaim) {
        let idle = machine.withLock { machine, word in
            // A lock-free claim whose release was refused: poked (see `settleInPlaceClaim`).
            if claim.lockFree { word.clear() }
            return machine.idleAfterInPlace(claim.observer, word: word)
        }
        if !idle { drain(claim.observer, immediate: true) }
    }

    /// Puts an `.immediate` drain at the back of the thread's trampoline.
    private func requeue(_ observer: UInt64) {
        Trampoline.deliveries.run(drain: self, observer)
    }

    /// Delivers an observer's pending events one by one until none is left. Only one drain per
    /// observer is scheduled at a time (the record's `scheduled` flag), so deliveries never overlap.
    ///
    /// An `.immediate` drain is fair: when more events wait for this observer and the thread's
    /// delivery trampoline holds other work (the stage downstream, woken by the event just
    /// delivered), the drain goes to the back of the trampoline's queue instead of looping. So in
    /// `subject -> map -> filter`, while other threads keep sending to the subject, each value goes
    /// all the way down before the next is taken: downstream stages make progress and nothing piles
    /// up between stages (a drain that looped would keep the downstream work waiting until it ran dry).
    func drain(_ observer: UInt64, immediate: Bool) {
        // The value claimed under the lock is moved out through this slot: no `Optional<Output>` or
        // generic enum is built per value (each would cost a metadata look-up here, unspecialised).
        withUnsafeTemporaryAllocation(of: Output.self, capacity: 1) { buffer in
            let slot = buffer.baseAddress!
            while true {
                switch machine.withLock({ $0.nextDelivery(for: observer, into: slot, word: $1) }) {
                case .idle: return
                case .value(let box, let more):
                    let value = slot.move()
                    unsafeDowncast(box, to: SinkBox<Output>.self).deliver(value)
                    if more && immediate && Trampoline.deliveries.hasQueuedWork {
                        // Still scheduled (the record's flag stays set): continue later, after the queue.
                        requeue(observer)
                        return
                    }
                case .terminal(let outcome, let box):
                    unsafeDowncast(box, to: SinkBox<Output>.self).deliver(outcome)
                case .state(let state, let box):
                    unsafeDowncast(box, to: StateSinkBox.self).handler(state)
                }
            }
        }
    }
}
