import CommandCore

extension Command {
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
