import Foundation

/// Proof, for the functions that read or change the observers' `scheduled` flags, that this lock
/// round settled the in-place claim, or that none can exist yet (see
/// `CommandStateMachine.settleInPlaceClaim(_:)`). Made only here.
struct ClaimsSettled {
    /// The word settled (nil before the command executes, when there is none to settle), where the
    /// command's end is marked (``ClaimWord/markEnded()``).
    let word: ClaimWord?
    fileprivate init(_ word: ClaimWord?) { self.word = word }
}

/// The delivery half of the command's state machine: values, observers and what each drain delivers.
extension CommandStateMachine {
    // MARK: - Values and observers

    /// A value from `run`; nil when ignored (not executing).
    @inline(__always)
    mutating func send<Output: Sendable>(_ value: Output) -> Wakeups? {
        var wakeups: Wakeups?
        var claim: InPlaceClaim?
        var unused: UInt32 = 0
        return withUnsafeMutablePointer(to: &unused) { word in
            send(value, claimInPlace: false, word: ClaimWord(word: word), wakeups: &wakeups, claim: &claim)
        } ? wakeups ?? Wakeups() : nil
    }

    // MARK: - The in-place claim
    //
    // A value handed in place to a command's one idle `.immediate` observer (a kept stage's common
    // case) claims the observer in the same lock round as the send. The claim is kept in the lock's
    // ``ClaimWord``, not in the record's `scheduled` flag, so that the delivering thread ends it with
    // one atomic fetch-and-subtract (``ClaimWord/release()``) instead of a second lock round. A lock round
    // that reads or changes the observers' `scheduled` flags (or removes an observer) first settles
    // the claim (``settleInPlaceClaim(_:)``): a claim still outstanding (claimed, neither released
    // nor poked) is poked and its record marked `scheduled`, so the delivering thread, finding its
    // release refused, takes the lock and looks (``idleAfterInPlace(_:word:)``) as any in-place
    // delivery did; a released claim left nothing to settle (its record was never marked). The
    // claimed record is `observers[0]`: a claim needs a single observer, and nothing removes one
    // without settling first. So past the settling, the machine only ever sees `scheduled`; the
    // functions that touch it take a ``ClaimsSettled``, which only the settling makes (or, before
    // the command executes, when nothing can be claimed, ``noClaimBeforeExecuting()``). Rounds
    // that do not touch observers (most of a command's life) pay nothing.

    /// Settles an outstanding claim (see above): one load of the word when nothing is claimed.
    @discardableResult
    @inline(__always)
    mutating func settleInPlaceClaim(_ word: ClaimWord) -> ClaimsSettled {
        if word.isClaimed { settleClaim(word) }
        return ClaimsSettled(word)
    }

    @inline(never)
    private mutating func settleClaim(_ word: ClaimWord) {
        precondition(!observers.isEmpty, "CommandStateMachine: an in-place claim's observer was removed unsettled")
        // Still delivering: from now on an ordinary scheduled delivery, which its thread ends under
        // the lock. (If it released the claim in between, the poke says so and clears the word.)
        if word.poke() { observers[0].scheduled = true }
    }

    /// Before the command executes no value was sent, so no claim can be outstanding: nothing to
    /// settle.
    func noClaimBeforeExecuting() -> ClaimsSettled {
        switch lifecycle {
        case .pending, .claimed, .waiting, .enqueued, .endedBeforeStart: break
        case .executing, .finished: assertionFailure("CommandStateMachine: claims not settled after the start")
        }
        return ClaimsSettled(nil)
    }

    /// A value from `run`; false when ignored (not executing). The observers to wake are put in
    /// `wakeups` (left nil when there are none: a kept stage's send destroys a nil, not an empty
    /// list). With `claimInPlace`, the first `.immediate` observer that is idle and has had every
    /// earlier value is claimed for this value at once (its cursor past it; marked scheduled, or for
    /// a command's one observer claimed in `word`, see above) and put in `claim`: the caller delivers
    /// it in place, without a second lock to claim it. The results are written to the caller's
    /// variables, not returned: a returned tuple of a list and an optional was copied and destroyed
    /// through outlined functions on every value.
    @inline(__always)
    mutating func send<Output: Sendable>(
        _ value: Output, claimInPlace: Bool, word: ClaimWord, wakeups: inout Wakeups?, claim: inout InPlaceClaim?
    ) -> Bool {
        guard case .executing = lifecycle else { return false }
        settleInPlaceClaim(word)
        let index = log.endIndex
        // A hot source's common case: nothing kept for late observers (`replay` `.none`), nothing
        // pending, one idle `.immediate` observer up to date, which the caller hands the value to in
        // place. The log only counts the value: it is never stored, so never copied nor destroyed.
        // A kept stage's common case (a combinator node, `replay` `.latest`): the same, with the log's one
        // kept value replaced in place (no append, no trim, no loop over the observers).
        // The claim goes in `word` (free unless an earlier claim's thread has not cleared it yet).
        if claimInPlace, let only = observers.onlyRecord, only.pointee.kind == .events, !only.pointee.scheduled,
            only.pointee.context.isImmediate, only.pointee.cursor == index, word.isFree,
            replay == .none ? log.skipIfEmpty() : replay == .latest && log.replaceOnlyValue(with: value)
        {
            advanceOnlyObserverInPlace(to: index &+ 1)
            word.claim()
            claim = InPlaceClaim(
                observer: only.pointee.id, box: Unmanaged.passUnretained(only.pointee.sink), lockFree: true)
            return true
        }
        sendToEveryObserver(value, at: index, claimInPlace: claimInPlace, wakeups: &wakeups, claim: &claim)
        return true
    }

    /// `observers[0].cursor = cursor`, written without the copy-on-write check (see
    /// ``ObserverList/setFirstCursorUnshared(_:)``): the records are never copied out of the lock
    /// round that reads them (the state lives in its lock's storage, and no function returns or keeps
    /// `observers`), so the state's reference is the only one.
    @inline(__always)
    private mutating func advanceOnlyObserverInPlace(to cursor: Int) {
        observers.setFirstCursorUnshared(cursor)
    }

    /// `send`'s general case: the value appended to the log and each idle events observer woken (or
    /// the first `.immediate` one up to date claimed for delivery in place). Out of line: inlined, it
    /// made the common case above spill more registers (about 8 instructions a value).
    @inline(never)
    private mutating func sendToEveryObserver<Output: Sendable>(
        _ value: Output, at index: Int, claimInPlace: Bool, wakeups result: inout Wakeups?, claim: inout InPlaceClaim?
    ) {
        log.append(value)
        var wakeups = Wakeups()
        var slot = 0
        while slot < observers.count {
            if observers[slot].kind == .events && !observers[slot].scheduled {
                observers[slot].scheduled = true
                let context = observers[slot].context
                if claimInPlace && claim == nil && context.isImmediate && observers[slot].cursor == index {
                    observers[slot].cursor = index + 1
                    claim = InPlaceClaim(
                        observer: observers[slot].id, box: Unmanaged.passUnretained(observers[slot].sink),
                        lockFree: false)
                } else {
                    wakeups.append(wakeup(at: slot))
                }
            }
            slot += 1
        }
        trim()
        if !wakeups.isEmpty { result = wakeups }
    }

    /// Detaches a consumer's observer; true when the command should now be cancelled (no consumer
    /// left, not executed directly, not ended).
    @inline(__always)
    mutating func releaseConsumer(observer: UInt64, word: ClaimWord) -> Bool {
        let settled = settleInPlaceClaim(word)
        guard let index = observerIndex(observer) else { return false }
        removeObserver(at: index, settled)
        trim()
        consumers -= 1
        return consumers == 0 && !pinned && outcome == nil
    }

    enum Attachment: Sendable {
        /// A caller that executes the command (`execute`): pins it.
        case executor
        /// A combinator consuming it: counted.
        case consumer
        /// An observer only (`observe`, `observeState`).
        case observer
    }

    @inline(__always)
    mutating func addObserver<Output: Sendable>(
        context: CallbackContext, sink: ObserverSink<Output>, as attachment: Attachment = .observer
    ) -> (id: UInt64, wakeup: Wakeup?) {
        switch attachment {
        case .executor: pinned = true
        case .consumer: consumers += 1
        case .observer: break
        }
        let id = nextObserverID
        nextObserverID += 1
        let kind: ObserverRecord.Kind
        switch sink {
        case .events, .values: kind = .events
        case .states: kind = .states
        }
        var record = ObserverRecord(
            id: id, context: context, kind: kind, sink: SinkBox.make(sink), cursor: log.startIndex)
        let hasWork: Bool
        switch kind {
        case .events: hasWork = !log.isEmpty || outcome != nil
        case .states: hasWork = didExecute || outcome != nil
        }
        record.scheduled = hasWork
        observers.append(record)
        return (id, hasWork ? wakeup(at: observers.count - 1) : nil)
    }

    @inline(__always)
    mutating func removeObserver(_ id: UInt64, word: ClaimWord) {
        let settled = settleInPlaceClaim(word)
        if let index = observerIndex(id) { removeObserver(at: index, settled) }
        trim()
    }

    /// Removes the observer at `index`. If a drain or an in-place delivery is under way for it
    /// (`scheduled`), its sink is kept (``RareFields/retiredSinks``) until that delivery finds it
    /// gone: an in-place delivery calls the sink unretained.
    mutating func removeObserver(at index: Int, _ settled: ClaimsSettled) {
        if observers[index].scheduled {
            rare.retiredSinks.append((observers[index].id, observers[index].sink))
        }
        observers.remove(at: index)
    }

    /// A drain or an idle mark found `observer` gone: its retired sink, if any, is released (the
    /// delivery that held it unretained is over).
    @inline(never)
    mutating func releaseRetiredSink(of observer: UInt64) {
        guard hasRareFields, !rare.retiredSinks.isEmpty else { return }
        rare.retiredSinks.removeAll { $0.observer == observer }
    }

    /// Where observer `id` is in `observers`. A plain loop, like the others on `observers` here: the
    /// cheapest search of a few records in this unspecialised generic code.
    @inline(__always)
    func observerIndex(_ id: UInt64) -> Int? {
        var index = 0
        while index < observers.count {
            if observers[index].id == id { return index }
            index += 1
        }
        return nil
    }

    /// The next thing a drain delivers to `observer`, claimed under the lock (a value is moved into
    /// `slot`). A value is never claimed once the command was cancelled: that is what makes "no value
    /// callback starts after `cancel()` returned" hold.
    @inline(__always)
    mutating func nextDelivery<Output: Sendable>(
        for observer: UInt64, into slot: UnsafeMutablePointer<Output>, word: ClaimWord
    ) -> Delivery {
        settleInPlaceClaim(word)
        guard let index = observerIndex(observer) else {
            releaseRetiredSink(of: observer)
            return .idle
        }
        let box = observers[index].sink
        switch observers[index].kind {
        case .events:
            let cancelled = isCancelled
            if !cancelled && observers[index].cursor < log.endIndex {
                slot.initialize(to: log.value(at: observers[index].cursor, as: Output.self))
                observers[index].cursor += 1
                let more = observers[index].cursor < log.endIndex || outcome != nil
                trim()
                return .value(box: box, more: more)
            }
            if let outcome {
                observers.remove(at: index)
                if replay != .all { trim() }
                return .terminal(outcome, box: box)
            }
        case .states:
            if didExecute && !observers[index].sentExecuting {
                observers[index].sentExecuting = true
                return .state(.executing, box: box)
            }
            if let outcome {
                observers.remove(at: index)
                return .state(outcome.state, box: box)
            }
        }
        observers[index].scheduled = false
        return .idle
    }

    /// After a value was delivered in place to `observer` (and a lock-free claim's release was
    /// refused: see ``settleInPlaceClaim(_:)``): marks it idle if nothing else waits for it (one lock
    /// and no drain); false if something does, and the caller drains.
    @inline(__always)
    mutating func idleAfterInPlace(_ observer: UInt64, word: ClaimWord) -> Bool {
        settleInPlaceClaim(word)
        guard let index = observerIndex(observer) else {
            releaseRetiredSink(of: observer)
            return true
        }
        if observers[index].cursor < log.endIndex || outcome != nil { return false }
        observers[index].scheduled = false
        return true
    }

    /// The next event for `observer`, as a value (for tests of the machine without threads).
    mutating func nextEvent<Output: Sendable>(for observer: UInt64, as type: Output.Type, word: ClaimWord)
        -> CommandEvent<Output>?
    {
        let slot = UnsafeMutablePointer<Output>.allocate(capacity: 1)
        defer { slot.deallocate() }
        switch nextDelivery(for: observer, into: slot, word: word) {
        case .value: return .value(slot.move())
        case .terminal(let outcome, _): return outcome.event()
        case .state, .idle: return nil
        }
    }

    /// The next state change for `observer` (for tests of the machine without threads).
    mutating func nextState<Output: Sendable>(for observer: UInt64, as type: Output.Type, word: ClaimWord)
        -> CommandState?
    {
        let slot = UnsafeMutablePointer<Output>.allocate(capacity: 1)
        defer { slot.deallocate() }
        if case .state(let state, _) = nextDelivery(for: observer, into: slot, word: word) { return state }
        return nil
    }

    /// `run` began: state observers hear about it.
    @inline(__always)
    mutating func wakeStateObservers(_ settled: ClaimsSettled) -> Wakeups {
        wake(settled) { $0.kind == .states }
    }

    @inline(__always)
    mutating func wakeAll(_ settled: ClaimsSettled) -> Wakeups { wake(settled) { _ in true } }

    @inline(__always)
    mutating func wake(_ settled: ClaimsSettled, _ include: (ObserverRecord) -> Bool) -> Wakeups {
        var wakeups = Wakeups()
        var index = 0
        while index < observers.count {
            if !observers[index].scheduled && include(observers[index]) {
                observers[index].scheduled = true
                wakeups.append(wakeup(at: index))
            }
            index += 1
        }
        return wakeups
    }

    /// The drain to schedule for the observer at `index`.
    @inline(__always)
    func wakeup(at index: Int) -> Wakeup {
        Wakeup(observer: observers[index].id, context: observers[index].context)
    }

    /// Drops values no live observer still needs and the replay policy does not keep.
    @inline(__always)
    mutating func trim() {
        let keepFrom: Int
        switch replay {
        case .all: return
        case .latest: keepFrom = log.endIndex - 1
        case .none: keepFrom = log.endIndex
        }
        var lowest = keepFrom
        var index = 0
        while index < observers.count {
            if observers[index].kind == .events, observers[index].cursor < lowest {
                lowest = observers[index].cursor
            }
            index += 1
        }
        log.trim(below: lowest)
    }
}
