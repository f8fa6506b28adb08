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
    public func flatMap<Result: Sendable>(
        maxConcurrent: Int = .max, _ transform: @escaping @Sendable (Output) throws -> Command<Result>?
    ) -> Command<Result> {
        let limit = Swift.max(1, maxConcurrent)
        return unary("flatMap") { link, input in
            let machine = Locked(FlatMapStateMachine<Output>(maxConcurrent: limit))
            @Sendable func perform(_ action: FlatMapStateMachine<Output>.Action) {
                switch action {
                case .none: break
                case .start(let value):
                    let inner: Command<Result>?
                    do { inner = try transform(value) } catch { return perform(machine.withLock { $0.failed(error) }) }
                    guard let inner else { return perform(machine.withLock { $0.innerCompleted() }) }
                    link.subscribe(runTime: inner) { event in
                        switch event {
                        case .value(let value): link.emit(.value(value))
                        case .completed: perform(machine.withLock { $0.innerCompleted() })
                        case .failed(let error): perform(machine.withLock { $0.failed(error) })
                        case .cancelled:
                            if machine.withLock({ $0.cancelled() }).isCancelled {
                                link.emit(.cancelled(link.inputCancelled(inner.displayName)))
                            }
                        }
                    }
                case .complete: link.emit(.completed)
                case .fail(let error): link.emit(.failed(error))
                case .cancelled: link.emit(.cancelled(link.inputCancelled(input.displayName)))
                }
            }
            return { event in
                switch event {
                case .value(let value): perform(machine.withLock { $0.value(value) })
                case .completed: perform(machine.withLock { $0.sourceCompleted() })
                case .failed(let error): perform(machine.withLock { $0.failed(error) })
                case .cancelled: perform(machine.withLock { $0.cancelled() })
                }
            }
        }
    }

    /// Starts a command for each value, cancelling the previous one (ReactiveCocoa's
    /// `switchToLatest` after a map).
    ///
    /// *Emits:* the values of the latest inner command only. *Completes:* when this command and the
    /// latest inner command completed. *Fails:* when this command or the latest inner fails, or
    /// `transform` throws. *Cancels:* the previous inner command when a new value arrives (unless
    /// another consumer needs it), and everything when the node is cancelled.
    public func flatMapLatest<Result: Sendable>(
        _ transform: @escaping @Sendable (Output) throws -> Command<Result>
    ) -> Command<Result> {
        return unary("flatMapLatest") { link, input in
            let state = Locked(LatestState())
            @Sendable func finishIfDone() {
                let done = state.withLock { state -> Bool in
                    guard state.sourceDone && !state.innerActive && !state.finished else { return false }
                    state.finished = true
                    return true
                }
                if done { link.emit(.completed) }
            }
            return { event in
                switch event {
                case .value(let value):
                    let inner: Command<Result>
                    do { inner = try transform(value) } catch { return link.emit(.failed(error)) }
                    let (generation, previous) = state.withLock { state in
                        state.generation += 1
                        state.innerActive = true
                        defer { state.current = nil }
                        return (state.generation, state.current)
                    }
                    previous?.cancel()
                    link.result.command.recordRunTimeInput(inner)
                    let subscription = inner.subscribe { event in
                        guard state.withLock({ $0.generation == generation && !$0.finished }) else { return }
                        switch event {
                        case .value(let value): link.emit(.value(value))
                        case .completed:
                            state.withLock { $0.innerActive = false }
                            finishIfDone()
                        case .failed, .cancelled:
                            state.withLock { $0.finished = true }
                            link.forwardTerminal(event, from: inner)
                        }
                    }
                    let stale = state.withLock { state -> Bool in
                        guard state.generation == generation else { return true }
                        state.current = subscription
                        return false
                    }
                    if stale { subscription.cancel() } else { link.add(subscription) }
                case .completed:
                    state.withLock { $0.sourceDone = true }
                    finishIfDone()
                case .failed, .cancelled:
                    state.withLock { $0.finished = true }
                    link.forwardTerminal(event, from: input)
                }
            }
        }
    }

    /// The original's `bind:` chain: when a command of the chain ends, `next` gets its index (0 for
    /// this command), the command, its last value (nil if it sent none) and its error (nil if it
    /// completed), and returns the next command to run, or nil to stop. Returning a command for an
    /// error recovers from it.
    ///
    /// *Emits:* the values of every command of the chain, in order. *Completes:* when `next` returns
    /// nil after a command completed. *Fails:* when `next` returns nil after a command failed (with
    /// that error), or `next` throws. *Cancels:* the active command of the chain.
    public func bind(
        _ next:
            @escaping @Sendable (_ index: Int, _ previous: Command<Output>, _ value: Output?, _ error: (any Error)?)
            throws -> Command<Output>?
    ) -> Command<Output> {
        .combinator("bind", inputs: [self]) { [unowned(unsafe) self] link in
            @Sendable func run(_ command: Command<Output>, index: Int) {
                let last = Locked<Output?>(nil)
                // The first is the node's input; each later one is chosen at run time.
                let handler: @Sendable (CommandEvent<Output>) -> Void = { event in
                    let error: (any Error)?
                    switch event {
                    case .value(let value):
                        last.withLock { $0 = value }
                        return link.emit(.value(value))
                    case .cancelled:
                        return link.forwardTerminal(event, from: command)
                    case .completed: error = nil
                    case .failed(let failure): error = failure
                    }
                    do {
                        if let following = try next(index, command, last.withLock { $0 }, error) {
                            run(following, index: index + 1)
                        } else if let error {
                            link.emit(.failed(error))
                        } else {
                            link.emit(.completed)
                        }
                    } catch {
                        link.emit(.failed(error))
                    }
                }
                if index == 0 { link.subscribe(command, handler) } else { link.subscribe(runTime: command, handler) }
            }
            run(self, index: 0)
        }
    }

    /// Recovers from a failure with the command `handler` returns.
    ///
    /// *Emits:* this command's values, then (after a failure) the recovery's. *Completes:* when this
    /// command completes, or the recovery does. *Fails:* when the recovery fails, or `handler`
    /// throws. *Cancels:* the active one.
    public func `catch`(_ handler: @escaping @Sendable (any Error) throws -> Command<Output>) -> Command<Output> {
        unary("catch") { link, input in
            { event in
                switch event {
                case .value(let value): link.emit(.value(value))
                case .completed, .cancelled: link.forwardTerminal(event, from: input)
                case .failed(let error):
                    do {
                        let recovery = try handler(error)
                        link.subscribe(runTime: recovery) { event in
                            if case .value(let value) = event {
                                link.emit(.value(value))
                            } else {
                                link.forwardTerminal(event, from: recovery)
                            }
                        }
                    } catch {
                        link.emit(.failed(error))
                    }
                }
            }
        }
    }
}

/// The state of `flatMapLatest`: which inner command is current.
struct LatestState: Sendable {
    var generation = 0
    var current: (any Cancelable)?
    var innerActive = false
    var sourceDone = false
    var finished = false
}

extension FlatMapStateMachine.Action {
    var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }
}

extension Command where Output: Sendable {
    /// The values of the latest command this command sends (ReactiveCocoa's `switchToLatest`); see
    /// ``flatMapLatest(_:)``.
    public func switchToLatest<Inner: Sendable>() -> Command<Inner> where Output == Command<Inner> {
        flatMapLatest { $0 }
    }
}
