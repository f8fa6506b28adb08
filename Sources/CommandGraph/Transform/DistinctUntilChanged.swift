import CommandCore

extension Command {
    /// Drops a value equal (by `isEquivalent`) to the one before it.
    ///
    /// *Emits:* the first value and each value not equivalent to the previous one. *Completes /
    /// Fails:* as this command, or fails when `isEquivalent` throws. *Cancels:* as ``map(_:)``.
    public func distinctUntilChanged(
        by isEquivalent: @escaping @Sendable (Output, Output) throws -> Bool
    ) -> Command<Output> {
        unary("distinctUntilChanged") { link, input in
            // The previous value; the input's events are serialised, the lock is for the memory model.
            let previous = Locked<Output?>(nil)
            return { event in
                guard case .value(let value) = event else { return link.forwardTerminal(event, from: input) }
                do {
                    let last = previous.withLock { $0 }
                    if let last, try isEquivalent(last, value) { return }
                    previous.withLock { $0 = value }
                    link.emit(.value(value))
                } catch {
                    link.emit(.failed(error))
                }
            }
        }
    }
}

extension Command where Output: Equatable {
    /// Drops a value equal to the one before it; see ``distinctUntilChanged(by:)``.
    public func distinctUntilChanged() -> Command<Output> { distinctUntilChanged(by: ==) }
}
