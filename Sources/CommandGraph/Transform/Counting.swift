import CommandCore

/// The state of `take(n)`, `skip(n)` and `takeLast(n)`: counts values, decides what to pass.
struct CountingStateMachine<Element: Sendable>: Sendable {
    enum Mode: Sendable { case take, skip, takeLast }

    enum Action: Sendable, Equatable {
        case drop
        case pass
        /// Pass this value, then complete (the n-th value of `take`).
        case passAndComplete
        /// On completion: emit these (takeLast's buffer), then complete.
        case flushAndComplete(count: Int)
    }

    private enum State {
        case counting(seen: Int)
        case done
    }

    let mode: Mode
    let count: Int
    private var state = State.counting(seen: 0)
    /// takeLast's buffer (a ring of at most `count`), oldest first once flushed.
    private(set) var buffer: [Element] = []
    private var head = 0

    init(_ mode: Mode, count: Int) {
        precondition(count >= 0, "CountingStateMachine: negative count \(count)")
        self.mode = mode
        self.count = count
    }

    /// `take(0)` completes before looking at anything.
    var completesAtOnce: Bool { mode == .take && count == 0 }

    mutating func value(_ value: Element) -> Action {
        guard case .counting(let seen) = state else { return .drop }
        switch mode {
        case .take:
            if seen + 1 >= count {
                state = .done
                return .passAndComplete
            }
            state = .counting(seen: seen + 1)
            return .pass
        case .skip:
            state = .counting(seen: seen + 1)
            return seen < count ? .drop : .pass
        case .takeLast:
            guard count > 0 else { return .drop }
            if buffer.count < count {
                buffer.append(value)
            } else {
                buffer[head] = value
                head = (head + 1) % count
            }
            return .drop
        }
    }

    /// The input completed.
    mutating func completed() -> Action {
        guard case .counting = state else { return .drop }
        state = .done
        if mode == .takeLast {
            buffer = Array(buffer[head...] + buffer[..<head])
            head = 0
            return .flushAndComplete(count: buffer.count)
        }
        return .flushAndComplete(count: 0)
    }
}

extension Command {
    private func counting(_ name: String, _ mode: CountingStateMachine<Output>.Mode, _ count: Int) -> Command<Output> {
        let count = Swift.max(0, count)
        return unary(name) { link, input in
            let machine = Locked(CountingStateMachine<Output>(mode, count: count))
            if machine.withLock({ $0.completesAtOnce }) { link.emit(.completed) }
            return { event in
                switch event {
                case .value(let value):
                    switch machine.withLock({ $0.value(value) }) {
                    case .drop, .flushAndComplete: break
                    case .pass: link.emit(.value(value))
                    case .passAndComplete:
                        link.emit(.value(value))
                        link.emit(.completed)
                    }
                case .completed:
                    let (action, buffer) = machine.withLock { ($0.completed(), $0.buffer) }
                    if case .flushAndComplete = action {
                        for value in buffer { link.emit(.value(value)) }
                        link.emit(.completed)
                    }
                case .failed, .cancelled:
                    link.forwardTerminal(event, from: input)
                }
            }
        }
    }

    /// The first `count` values.
    ///
    /// *Emits:* the first `count` values. *Completes:* right after the `count`-th value (cancelling
    /// this command if no other consumer needs it), or when this command completes first; `take(0)`
    /// completes at once. *Fails:* when this command fails first. *Cancels:* as ``map(_:)``.
    public func take(_ count: Int) -> Command<Output> { counting("take(\(count))", .take, count) }

    /// Every value after the first `count`.
    ///
    /// *Emits:* values after the first `count`. *Completes / Fails:* as this command.
    /// *Cancels:* as ``map(_:)``.
    public func skip(_ count: Int) -> Command<Output> { counting("skip(\(count))", .skip, count) }

    /// The last `count` values, emitted when this command completes.
    ///
    /// *Emits:* on completion, the last `count` values in order. *Completes:* right after them.
    /// *Fails:* when this command fails (nothing is emitted). *Cancels:* as ``map(_:)``.
    /// - Complexity: O(`count`) memory.
    public func takeLast(_ count: Int) -> Command<Output> { counting("takeLast(\(count))", .takeLast, count) }
}
