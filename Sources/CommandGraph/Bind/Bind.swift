import CommandCore

extension Command {
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
}
