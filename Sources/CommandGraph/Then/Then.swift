import CommandCore

extension Command {
    /// Runs `inputs` one after the other, each subscribed only once the previous one completed.
    static func sequence(_ name: String, _ inputs: [NaryInput<Output>]) -> Command<Output> {
        combinator(name, inputs: inputs.map(\.operation)) { link in
            let machine = Locked(SequenceStateMachine(count: inputs.count))
            if inputs.isEmpty { return link.emit(.completed) }
            @Sendable func subscribe(_ index: Int) {
                link.add(
                    inputs[index].subscribe { event in
                        let action: SequenceStateMachine.Action = machine.withLock { machine in
                            switch event {
                            case .value: return machine.value(at: index)
                            case .completed: return machine.completed(at: index)
                            case .failed: return machine.failed(at: index)
                            case .cancelled: return machine.cancelled(at: index)
                            }
                        }
                        switch action {
                        case .none: break
                        case .pass: if case .value(let value) = event { link.emit(.value(value)) }
                        case .start(let next): subscribe(next)
                        case .complete: link.emit(.completed)
                        case .fail: if case .failed(let error) = event { link.emit(.failed(error)) }
                        case .cancelled(let index): link.emit(.cancelled(link.inputCancelled(index, of: inputs)))
                        }
                    })
            }
            subscribe(0)
        }
    }

    /// Runs `next` after this command completed, ignoring this command's values (ReactiveCocoa's
    /// `then:`). `next` gets this command as a dependency (`next.addDependency(self)`): the edge *is*
    /// the ordering, visible in `next.dependencies`.
    ///
    /// *Emits:* `next`'s values. *Completes:* when `next` completes. *Fails:* when this command fails
    /// (`next` never runs: it ends cancelled by the dependency rule) or `next` fails.
    /// *Cancels:* the active one (and the other, through the dependency) when the node is cancelled.
    public func then<Next: Sendable>(_ next: Command<Next>) -> Command<Next> {
        next.addDependency(self)
        return then { next }
    }

    /// Runs the command `makeNext` returns after this command completed; `makeNext` is called only
    /// then, so the next command is not even built before. A throw fails the node.
    ///
    /// *Emits:* the next command's values. *Completes / Fails / Cancels:* as ``then(_:)-(Command<Next>)``.
    public func then<Next: Sendable>(_ makeNext: @escaping @Sendable () throws -> Command<Next>) -> Command<Next> {
        unary("then") { link, input in
            { event in
                switch event {
                case .value: break
                case .failed, .cancelled: link.forwardTerminal(event, from: input)
                case .completed:
                    do {
                        let next = try makeNext()
                        link.subscribe(runTime: next) { event in
                            if case .value(let value) = event {
                                link.emit(.value(value))
                            } else {
                                link.forwardTerminal(event, from: next)
                            }
                        }
                    } catch {
                        link.emit(.failed(error))
                    }
                }
            }
        }
    }

    /// This command's values, then each of `others`' in turn, each subscribed only after the previous
    /// one completed; see ``concat(_:)-(_)``.
    public func concat(_ others: Command<Output>...) -> Command<Output> { .concat([self] + others) }

    /// The values of `inputs` one input after the other.
    ///
    /// *Emits:* the first input's values, then the second's... An input is subscribed (executed) only
    /// after the previous one completed. *Completes:* when the last completes (an empty array
    /// completes at once). *Fails:* on the first failure; later inputs never start.
    /// *Cancels:* the active input when the node is cancelled.
    public static func concat(_ inputs: [Command<Output>]) -> Command<Output> {
        sequence("concat", inputs.map { NaryInput($0) })
    }
}
