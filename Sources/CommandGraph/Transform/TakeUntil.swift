import CommandCore

extension Command {
    /// This command's values until `trigger` sends a value or completes (ReactiveCocoa 2's
    /// `takeUntil:`).
    ///
    /// *Emits:* this command's values until then. *Completes:* when `trigger` sends or completes
    /// (this command is then cancelled unless another consumer needs it), or when this command
    /// completes. *Fails:* when this command fails (a failing trigger is ignored). *Cancels:* both.
    public func take<Trigger: Sendable>(until trigger: Command<Trigger>) -> Command<Output> {
        .combinator("takeUntil", inputs: [self, trigger]) { [unowned(unsafe) self] link in
            link.subscribe(trigger) { event in
                switch event {
                case .value, .completed: link.emit(.completed)
                case .failed, .cancelled: break
                }
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
}
