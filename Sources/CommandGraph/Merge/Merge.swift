import CommandCore

extension Command {
    static func mergeNode(_ inputs: [NaryInput<Output>]) -> Command<Output> {
        @Sendable func perform(_ action: MergeStateMachine.Action, _ end: InputEnd, _ link: Link<Output>) {
            switch action {
            case .none: break
            case .complete: link.enqueue(.completed)
            case .fail: if case .failed(let error) = end { link.enqueue(.failed(error)) }
            case .cancelled(let index): link.enqueue(.cancelled(link.inputCancelled(index, of: inputs)))
            }
        }
        return nary(
            "merge", inputs: inputs, machine: { MergeStateMachine(inputs: inputs.count) },
            start: { machine, link in perform(machine.start(), .completed, link) },
            // A value needs no state: straight to the result, in arrival order (after the node ended,
            // dropped there).
            direct: { value, link in link.send(value) },
            value: { _, _, _, _ in }
        ) { machine, index, end, link in
            switch end {
            case .completed: perform(machine.completed(), end, link)
            case .failed: perform(machine.failed(), end, link)
            case .cancelled: perform(machine.cancelled(at: index), end, link)
            }
        }
    }

    /// Every value of `inputs`, in arrival order.
    ///
    /// *Emits:* each value of each input as it arrives. *Completes:* when every input completed.
    /// *Fails:* on the first input failure. *Cancels:* the inputs no other consumer needs, when the
    /// node fails or is cancelled; an input cancelled ends the node cancelled, naming it. An empty
    /// array completes at once.
    public static func merge(_ inputs: [Command<Output>]) -> Command<Output> {
        mergeNode(inputs.map { NaryInput($0) })
    }

    /// This command's values and `others`' in arrival order; see ``merge(_:)``.
    public func merge(_ others: Command<Output>...) -> Command<Output> {
        .merge([self] + others)
    }
}
