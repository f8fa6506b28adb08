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
    /// A stateless single-input node (`map`, `filter`, `compactMap`): `transform` gets what takes the
    /// node's values and what fails it, and returns what handles each input value, handed over as it
    /// is; the input's terminal event is forwarded (``Link/forwardTerminal(_:inputName:)``). The
    /// values' fast path: no event is built per value, and stages nothing else holds are fused into
    /// the node that consumes them (`Node/Fusion.swift`).
    @usableFromInline
    func stage<Result: Sendable>(_ name: String, _ transform: @escaping StageTransform<Output, Result>) -> Command<
        Result
    > {
        // `unowned(unsafe)`: the node keeps its input alive (`retain(inputs:)`) until it ends, and the
        // body runs before that. Only its name is read: the input is taken from the node's held inputs.
        // The node wires itself as a consumer fuses it: its transform, then the stages above it.
        let stage = TransformStage(transform)
        let node = Command<Result>.combinator(name, inputs: [self]) { [unowned(unsafe) self] link in
            stage.fuse(
                link.result.command, ahead: link.result.forwarder, into: Fuser(link: link, inputName: self.displayName),
                budget: maxFusedStages - 1, linked: false)
        }
        node.fusibleStage = stage
        return node
    }
}

extension Link {
    /// Forwards an input's terminal event: completed and failed as they are; a cancelled input
    /// cancels this node with an error naming it.
    func forwardTerminal<Input>(_ event: CommandEvent<Input>, from input: Command<Input>) {
        forwardTerminal(event, inputName: input.displayName)
    }

    /// Forwards an input's terminal event; a cancel names the input `inputName`.
    func forwardTerminal<Input>(_ event: CommandEvent<Input>, inputName: String) {
        switch event {
        case .value: break
        case .completed: emit(.completed)
        case .failed(let error): emit(.failed(error))
        case .cancelled: emit(.cancelled(inputCancelled(inputName)))
        }
    }
}
