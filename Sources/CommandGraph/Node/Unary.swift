import CommandCore

extension Command {
    /// A node with this command as its only input. `makeHandler` gets the node's link and returns what
    /// handles each input event. An input's events arrive one at a time (its delivery contract), so a
    /// handler's state is never touched by two threads at once; it is still kept under a lock where it
    /// exists, for the memory model's sake.
    func unary<Result: Sendable>(
        _ name: String,
        _ makeHandler: @escaping @Sendable (Link<Result>, Command<Output>) -> @Sendable (CommandEvent<Output>) -> Void
    ) -> Command<Result> {
        // `unowned(unsafe)`: the node keeps its input alive (`retain(inputs:)`) until it ends, and the
        // body runs before that.
        .combinator(name, inputs: [self]) { [unowned(unsafe) self] link in
            link.subscribe(self, makeHandler(link, self))
        }
    }
}

extension Command {
    /// A single-input node that handles values only (`map`, `filter`...): `makeHandler` gets the node's
    /// link and returns what handles each value, handed over as it is; the input's terminal event is
    /// forwarded (``Link/forwardTerminal(_:from:)``). The values' fast path: no event is built per value.
    func unaryValues<Result: Sendable>(
        _ name: String, _ makeHandler: @escaping @Sendable (Link<Result>) -> @Sendable (Output) -> Void
    ) -> Command<Result> {
        // `unowned(unsafe)`: as in `unary`.
        .combinator(name, inputs: [self]) { [unowned(unsafe) self] link in
            link.subscribe(self, value: makeHandler(link)) { [unowned(unsafe) self] event in
                link.forwardTerminal(event, from: self)
            }
        }
    }
}

extension Link {
    /// Forwards an input's terminal event: completed and failed as they are; a cancelled input
    /// cancels this node with an error naming it.
    func forwardTerminal<Input>(_ event: CommandEvent<Input>, from input: Command<Input>) {
        switch event {
        case .value: break
        case .completed: emit(.completed)
        case .failed(let error): emit(.failed(error))
        case .cancelled: emit(.cancelled(inputCancelled(input.displayName)))
        }
    }
}
