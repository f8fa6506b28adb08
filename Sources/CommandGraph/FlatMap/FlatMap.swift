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
}

extension FlatMapStateMachine.Action {
    var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }
}
