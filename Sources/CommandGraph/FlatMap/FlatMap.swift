import CommandCore

extension Command {
    /// Starts a command for each value and merges their values (ReactiveCocoa's `flattenMap:`).
    ///
    /// *Emits:* the values of every inner command, interleaved in arrival order. At most
    /// `maxConcurrent` inner commands run at once; later source values wait, in order (never dropped).
    /// `transform` returning nil means "no inner command" for that value.
    /// *Completes:* when this command and every inner command completed.
    /// *Fails:* when this command or any inner command fails, or `transform` throws; everything else
    /// is cancelled (ReactiveCocoa's rule). *Cancels:* this command and every inner command.
    ///
    /// The node lets go of an inner command once it ended, so an endless source keeps only the inner
    /// commands still running.
    public func flatMap<Result: Sendable>(
        maxConcurrent: Int = .max, _ transform: @escaping @Sendable (Output) throws -> Command<Result>?
    ) -> Command<Result> {
        let limit = Swift.max(1, maxConcurrent)
        // `unowned(unsafe)`: the node keeps its input alive until it ends, and the body runs before that.
        return .combinator("flatMap", inputs: [self]) { [unowned(unsafe) self] link in
            let node = FlatMapNode(link: link, sourceName: displayName, maxConcurrent: limit, transform: transform)
            link.subscribe(self, value: { node.received($0) }, terminal: { node.sourceEnded($0) })
        }
    }
}

/// A running `flatMap`: the state machine and the values waiting for a free slot under one lock.
///
/// A class, not closures over a generic state: a method of a generic class finds its type parameters
/// in the instance, where an unspecialised closure over a generic value looks its metadata up per call.
final class FlatMapNode<Input: Sendable, Output: Sendable>: @unchecked Sendable {
    // `@unchecked Sendable`: `waiting` and `waitingHead` are only touched inside `machine.withLock`;
    // everything else is immutable.
    private let link: Link<Output>
    private let sourceName: String
    private let transform: @Sendable (Input) throws -> Command<Output>?
    private let machine: Locked<FlatMapStateMachine>
    /// The values waiting for a free slot (`maxConcurrent`), oldest at `waitingHead`.
    private var waiting: [Input] = []
    private var waitingHead = 0

    init(
        link: Link<Output>, sourceName: String, maxConcurrent: Int,
        transform: @escaping @Sendable (Input) throws -> Command<Output>?
    ) {
        self.link = link
        self.sourceName = sourceName
        self.transform = transform
        machine = Locked(FlatMapStateMachine(maxConcurrent: maxConcurrent))
    }

    func received(_ value: Input) {
        let action = machine.withLock { machine -> FlatMapStateMachine.Action in
            let action = machine.value()
            if case .wait = action { waiting.append(value) }
            return action
        }
        if case .start = action { start(value) }
    }

    func sourceEnded(_ event: CommandEvent<Input>) {
        switch event {
        case .value: break
        case .completed: perform(machine.withLock { $0.sourceCompleted() })
        case .failed(let error): perform(machine.withLock { $0.failed(error) })
        case .cancelled: perform(machine.withLock { $0.cancelled() })
        }
    }

    private func start(_ value: Input) {
        let inner: Command<Output>?
        do { inner = try transform(value) } catch { return perform(machine.withLock { $0.failed(error) }) }
        guard let inner else { return innerCompleted() }
        // An inner that has already finished (a cached result, a subject that sent and completed)
        // replays here and now, as an observer attaching to it would get it, without one.
        if let ending = inner.replayIfFinished({ link.send($0) }) { return ended(ending, inner: inner) }
        link.subscribe(runTime: inner, value: { [link] in link.send($0) }) { [self, unowned(unsafe) inner] event in
            // `unowned(unsafe)`: the inner command is delivering this event, so it is alive.
            result(event, of: inner)
        }
    }

    /// An inner command's terminal event.
    private func result(_ event: CommandEvent<Output>, of inner: Command<Output>) {
        switch event {
        case .value: break
        case .completed: ended(.completed, inner: inner)
        case .failed(let error): ended(.failed(error), inner: inner)
        case .cancelled(let error): ended(.cancelled(error), inner: inner)
        }
    }

    /// How an inner command ended.
    private func ended(_ ending: Termination, inner: Command<Output>) {
        switch ending {
        case .completed: innerCompleted()
        case .failed(let error): perform(machine.withLock { $0.failed(error) })
        case .cancelled:
            if case .cancelled = machine.withLock({ $0.cancelled() }) {
                link.emit(.cancelled(link.inputCancelled(inner.displayName)))
            }
        }
    }

    private func innerCompleted() {
        // The waiting value to start, if any, is moved out through this slot: an `Input?` would cost
        // two look-ups of `Optional<Input>`'s metadata per inner here (unspecialised code), about
        // 650 instructions, a twentieth of a `flatMap` value.
        withUnsafeTemporaryAllocation(of: Input.self, capacity: 1) { buffer in
            let slot = buffer.baseAddress!
            let action = machine.withLock { machine -> FlatMapStateMachine.Action in
                let action = machine.innerCompleted()
                if case .startWaiting = action { slot.initialize(to: takeWaiting()) }
                return action
            }
            if case .startWaiting = action { return start(slot.move()) }
            perform(action)
        }
    }

    /// The oldest waiting value; under the lock.
    private func takeWaiting() -> Input {
        let value = waiting[waitingHead]
        waitingHead += 1
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead >= 64 && waitingHead * 2 >= waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
        return value
    }

    private func perform(_ action: FlatMapStateMachine.Action) {
        switch action {
        case .none, .start, .wait, .startWaiting: return
        case .complete, .fail, .cancelled: end(action)
        }
    }

    /// Out of line: building an `Emission<Output>` looks its metadata up, which the per-value path
    /// (`perform(.none)`) would otherwise pay on every call (measured: twice a value).
    @inline(never)
    private func end(_ action: FlatMapStateMachine.Action) {
        switch action {
        case .none, .start, .wait, .startWaiting: break
        case .complete: link.emit(.completed)
        case .fail(let error): link.emit(.failed(error))
        case .cancelled: link.emit(.cancelled(link.inputCancelled(sourceName)))
        }
    }
}
