import CommandCore

extension Command {
    /// Fails if this command has not ended `interval` after the node started (ReactiveCocoa's
    /// absolute deadline).
    ///
    /// *Emits:* this command's values. *Completes:* when it completes before the deadline.
    /// *Fails:* when it fails, or with `CommandError/Code/timedOut` at the deadline (this command
    /// is then cancelled unless another consumer needs it); at once with
    /// `CommandError/Code/invalidArgument` if `interval` is not positive. *Cancels:* this command and
    /// the timer.
    public func timeout(_ interval: Duration, scheduler: any CommandScheduler = DispatchScheduler.shared) -> Command<
        Output
    > {
        .combinator("timeout(\(interval))", inputs: [self]) { [unowned(unsafe) self] link in
            guard interval > .zero else {
                return link.emit(
                    .failed(
                        CommandError(
                            code: .invalidArgument, command: link.node,
                            message: "timeout(\(interval)) needs a positive interval.")))
            }
            let name = displayName
            link.schedule(on: scheduler, after: interval) {
                link.emit(
                    .failed(
                        CommandError(
                            code: .timedOut, command: link.node,
                            message: "'\(name)' did not finish within \(interval); it was cancelled.",
                            dependency: name)))
            }
            link.subscribe(self) { event in
                if case .value(let value) = event {
                    link.emit(.value(value))
                } else {
                    link.forwardTerminal(event, from: self)
                }
            }
        }
    }

    /// Every event `interval` later, in order.
    ///
    /// *Emits:* each value `interval` after it arrived. *Completes / Fails:* `interval` after this
    /// command did. *Cancels:* this command and the pending events (dropped).
    public func delay(_ interval: Duration, scheduler: any CommandScheduler = DispatchScheduler.shared) -> Command<
        Output
    > {
        unary("delay(\(interval))") { link, input in
            // Events waiting, oldest first: a timer fires for the oldest, since all wait the same time.
            let pending = Locked<[CommandEvent<Output>]>([])
            return { event in
                pending.withLock { $0.append(event) }
                link.schedule(on: scheduler, after: interval) {
                    let due = pending.withLock { $0.removeFirst() }
                    if case .value(let value) = due {
                        link.emit(.value(value))
                    } else {
                        link.forwardTerminal(due, from: input)
                    }
                }
            }
        }
    }

    /// Values sent only after `interval` without another value (ReactiveCocoa 2's `throttle:`, which
    /// other libraries call debounce).
    ///
    /// *Emits:* a value once `interval` passed without a newer one. *Completes:* when this command
    /// completes, after sending the value still waiting. *Fails:* when it fails (the waiting value is
    /// dropped). *Cancels:* this command and the timer.
    public func throttle(_ interval: Duration, scheduler: any CommandScheduler = DispatchScheduler.shared) -> Command<
        Output
    > {
        unary("throttle(\(interval))") { link, input in
            let waiting = Locked<(value: Output, generation: Int)?>(nil)
            return { event in
                switch event {
                case .value(let value):
                    let generation = waiting.withLock { waiting -> Int in
                        let generation = (waiting?.generation ?? 0) + 1
                        waiting = (value, generation)
                        return generation
                    }
                    link.schedule(on: scheduler, after: interval) {
                        let due = waiting.withLock { waiting -> Output? in
                            guard let current = waiting, current.generation == generation else { return nil }
                            waiting = nil
                            return current.value
                        }
                        if let due { link.emit(.value(due)) }
                    }
                case .completed:
                    if let last = waiting.withLock({ waiting -> Output? in
                        defer { waiting = nil }
                        return waiting?.value
                    }) {
                        link.emit(.value(last))
                    }
                    link.forwardTerminal(event, from: input)
                case .failed, .cancelled:
                    link.forwardTerminal(event, from: input)
                }
            }
        }
    }

    /// Counts up from 0 every `period`, until cancelled.
    ///
    /// *Emits:* 0, 1, 2... one every `period` after the node started. *Completes:* never (use
    /// `take(_:)`). *Cancels:* the timer.
    public static func interval(_ period: Duration, scheduler: any CommandScheduler = DispatchScheduler.shared)
        -> Command<Int>
    where Output == Int {
        combinator("interval(\(period))", inputs: []) { link in
            @Sendable func tick(_ count: Int) {
                link.schedule(on: scheduler, after: period) {
                    link.emit(.value(count))
                    tick(count + 1)
                }
            }
            tick(0)
        }
    }
}
