import Foundation

/// The delivery half of the command's state machine: values, observers and what each drain delivers.
extension CommandStateMachine {
    // MARK: - Values and observers

    /// A value from `run`; nil when ignored (not executing).
    @inline(__always)
    mutating func send(_ value: Output) -> [Wakeup]? {
        guard case .executing = lifecycle else { return nil }
        log.append(value)
        let wakeups = wake { if case .events = $0.sink { return true } else { return false } }
        trim()
        return wakeups
    }

    mutating func retain(inputs more: [Operation]) {
        inputs += more
        inputLinks += more.map(WeakOperation.init)
    }

    var heldOperations: [Operation] { dependencies + inputs }

    /// Records a command subscribed at run time. Entries whose command was released are dropped
    /// whenever the list doubles, so an endless `flatMap` keeps only about twice its live inners.
    mutating func recordRunTimeInput(_ operation: Operation) {
        if runTimeLinks.count >= 8 && runTimeLinks.count.nonzeroBitCount == 1 {
            runTimeLinks.removeAll { $0.operation == nil }
        }
        runTimeLinks.append(WeakOperation(operation))
    }

    /// The inputs, also after they were released (while something else keeps them alive).
    var inputOperations: [Operation] { inputLinks.compactMap(\.operation) }

    /// Empties the input list (when the command is released).
    @inline(__always)
    mutating func takeInputs() -> [Operation] {
        defer { inputs = [] }
        return inputs
    }

    /// Detaches a consumer's observer; true when the command should now be cancelled (no consumer
    /// left, not executed directly, not ended).
    @inline(__always)
    mutating func releaseConsumer(observer: UInt64) -> Bool {
        guard let index = observerIndex(observer) else { return false }
        observers.remove(at: index)
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
    mutating func addObserver(
        context: CallbackContext, sink: ObserverRecord<Output>.Sink, as attachment: Attachment = .observer
    ) -> (id: UInt64, wakeup: Wakeup?) {
        switch attachment {
        case .executor: pinned = true
        case .consumer: consumers += 1
        case .observer: break
        }
        let id = nextObserverID
        nextObserverID += 1
        var record = ObserverRecord(id: id, context: context, sink: sink, cursor: log.startIndex)
        let hasWork: Bool
        switch sink {
        case .events: hasWork = !log.isEmpty || outcome != nil
        case .states: hasWork = didExecute || outcome != nil
        }
        record.scheduled = hasWork
        observers.append(record)
        return (id, hasWork ? Wakeup(observer: id, context: context) : nil)
    }

    @inline(__always)
    mutating func removeObserver(_ id: UInt64) {
        if let index = observerIndex(id) { observers.remove(at: index) }
        trim()
    }

    /// Where observer `id` is in `observers`. A plain loop, like the others on `observers` here: a
    /// generic algorithm of the standard library (`firstIndex(where:)`, `indices`) is not specialised
    /// for `ObserverRecord<Output>` and looks its metadata and witness tables up on every call.
    @inline(__always)
    func observerIndex(_ id: UInt64) -> Int? {
        var index = 0
        while index < observers.count {
            if observers[index].id == id { return index }
            index += 1
        }
        return nil
    }

    enum Delivery: Sendable {
        /// An event and its handler; `more`: something else is already waiting for this observer.
        case event(CommandEvent<Output>, @Sendable (CommandEvent<Output>) -> Void, more: Bool)
        case state(CommandState, @Sendable (CommandState) -> Void)
        /// Nothing left: the drain stops (and the observer is no longer scheduled).
        case idle
    }

    /// The next thing a drain delivers to `observer`, claimed under the lock. A value is never
    /// claimed once the command was cancelled: that is what makes "no value callback starts after
    /// `cancel()` returned" hold.
    @inline(__always)
    mutating func nextDelivery(for observer: UInt64) -> Delivery {
        guard let index = observerIndex(observer) else { return .idle }
        switch observers[index].sink {
        case .events(let handler):
            let cancelled = isCancelled
            if !cancelled && observers[index].cursor < log.endIndex {
                let value = log.value(at: observers[index].cursor)
                observers[index].cursor += 1
                let more = observers[index].cursor < log.endIndex || outcome != nil
                trim()
                return .event(.value(value), handler, more: more)
            }
            if let outcome {
                observers.remove(at: index)
                if replay != .all { trim() }
                return .event(outcome.event(), handler, more: false)
            }
        case .states(let handler):
            if didExecute && !observers[index].sentExecuting {
                observers[index].sentExecuting = true
                return .state(.executing, handler)
            }
            if let outcome {
                observers.remove(at: index)
                return .state(outcome.state, handler)
            }
        }
        observers[index].scheduled = false
        return .idle
    }

    /// `run` began: state observers hear about it.
    @inline(__always)
    mutating func wakeStateObservers() -> [Wakeup] {
        wake { if case .states = $0.sink { return true } else { return false } }
    }

    @inline(__always)
    mutating func wakeAll() -> [Wakeup] { wake { _ in true } }

    @inline(__always)
    mutating func wake(_ include: (ObserverRecord<Output>) -> Bool) -> [Wakeup] {
        var wakeups: [Wakeup] = []
        var index = 0
        while index < observers.count {
            if !observers[index].scheduled && include(observers[index]) {
                observers[index].scheduled = true
                wakeups.append(Wakeup(observer: observers[index].id, context: observers[index].context))
            }
            index += 1
        }
        return wakeups
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
            if case .events = observers[index].sink, observers[index].cursor < lowest {
                lowest = observers[index].cursor
            }
            index += 1
        }
        log.trim(below: lowest)
    }
}
