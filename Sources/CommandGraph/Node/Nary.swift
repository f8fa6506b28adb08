import CommandCore
import Foundation

/// One input of a many-input combinator, its values erased to the state machine's element type.
struct NaryInput<Element: Sendable>: Sendable {
    let operation: Operation
    let name: @Sendable () -> String
    /// Subscribes with values handed over as they are (no event built per value) and the terminal
    /// event (never `.value`) to `onTerminal`.
    let subscribe:
        @Sendable (
            _ onValue: @escaping @Sendable (Element) -> Void,
            _ onTerminal: @escaping @Sendable (CommandEvent<Element>) -> Void
        ) -> (any Cancelable)

    init<Value>(_ command: Command<Value>, _ transform: @escaping @Sendable (Value) -> Element) {
        operation = command
        // `unowned(unsafe)`: the node keeps its inputs alive until it ends (`retain(inputs:)`), and
        // these closures only run while it is running.
        name = { [unowned(unsafe) command] in command.displayName }
        subscribe = { [unowned(unsafe) command] onValue, onTerminal in
            command.subscribe(value: { onValue(transform($0)) }) { event in
                switch event {
                case .value: break
                case .completed: onTerminal(.completed)
                case .failed(let error): onTerminal(.failed(error))
                case .cancelled(let error): onTerminal(.cancelled(error))
                }
            }
        }
    }

    init(_ command: Command<Element>) {
        operation = command
        name = { [unowned(unsafe) command] in command.displayName }
        subscribe = { [unowned(unsafe) command] onValue, onTerminal in
            command.subscribe(value: onValue, terminal: onTerminal)
        }
    }

    /// Subscribes with every event, values included, to `onEvent` (for inputs off the hot path: the
    /// sequence node's).
    func subscribe(_ onEvent: @escaping @Sendable (CommandEvent<Element>) -> Void) -> any Cancelable {
        subscribe({ onEvent(.value($0)) }, onEvent)
    }
}

/// How an input of a many-input node ended (its values go to the node's value path, never here).
enum InputEnd: Sendable {
    case completed
    case failed(any Error)
    case cancelled

    /// The end an input's terminal event says; nil for a value (which the value path carries).
    init?<Element>(_ event: CommandEvent<Element>) {
        switch event {
        case .value: return nil
        case .completed: self = .completed
        case .failed(let error): self = .failed(error)
        case .cancelled: self = .cancelled
        }
    }
}

extension Command {
    /// A node fed by `inputs`: each input's end, tagged with its index, goes to `handle` under the
    /// lock of `machine`, which queues emissions on the link; they are sent after unlocking, in order.
    ///
    /// Values go to `value` (no event is built per value); with `direct`, they skip the machine and
    /// go straight to it, unlocked (`merge`: a value needs no state, and the link drops a value after
    /// the node ended).
    static func nary<Element: Sendable, Machine: Sendable>(
        _ name: String, inputs: [NaryInput<Element>], machine makeMachine: @escaping @Sendable () -> Machine,
        start: (@Sendable (inout Machine, Link<Output>) -> Void)? = nil,
        direct: (@Sendable (Element, Link<Output>) -> Void)? = nil,
        value: @escaping @Sendable (inout Machine, Int, Element, Link<Output>) -> Void,
        handle: @escaping @Sendable (inout Machine, Int, InputEnd, Link<Output>) -> Void
    ) -> Command<Output> {
        combinator(name, inputs: inputs.map(\.operation)) { link in
            let machine = Locked(makeMachine())
            if let start {
                machine.withLock { start(&$0, link) }
                link.flush()
            }
            for (index, input) in inputs.enumerated() {
                let onValue: @Sendable (Element) -> Void
                if let direct {
                    onValue = { direct($0, link) }
                } else {
                    onValue = { element in
                        machine.withLock { value(&$0, index, element, link) }
                        link.flush()
                    }
                }
                link.add(
                    input.subscribe(onValue) { event in
                        // Values came through `onValue`: only the end is left.
                        guard let end = InputEnd(event) else { return }
                        machine.withLock { handle(&$0, index, end, link) }
                        link.flush()
                    })
            }
        }
    }
}

/// A many-input state machine fed one event at a time, each returning what to do.
protocol NaryStateMachine: Sendable {
    associatedtype Element: Sendable
    associatedtype Action: Sendable
    /// The node started (with no input, it may end at once).
    mutating func start() -> Action
    mutating func value(_ value: Element, at index: Int) -> Action
    mutating func completed(at index: Int) -> Action
    mutating func failed(_ error: any Error) -> Action
    mutating func cancelled(at index: Int) -> Action
}

extension Command {
    /// A node whose inputs feed a ``NaryStateMachine``; `perform` turns its actions into emissions
    /// (called under the machine's lock: it only queues them on the link).
    static func nary<Machine: NaryStateMachine>(
        _ name: String, inputs: [NaryInput<Machine.Element>], machine makeMachine: @escaping @Sendable () -> Machine,
        perform: @escaping @Sendable (Machine.Action, Link<Output>) -> Void
    ) -> Command<Output> {
        nary(
            name, inputs: inputs, machine: makeMachine, start: { machine, link in perform(machine.start(), link) },
            value: { machine, index, value, link in perform(machine.value(value, at: index), link) }
        ) { machine, index, end, link in
            switch end {
            case .completed: perform(machine.completed(at: index), link)
            case .failed(let error): perform(machine.failed(error), link)
            case .cancelled: perform(machine.cancelled(at: index), link)
            }
        }
    }
}

extension Link {
    /// The error for input `index` of `inputs` having been cancelled.
    func inputCancelled<Element>(_ index: Int, of inputs: [NaryInput<Element>]) -> CommandError {
        inputCancelled(inputs[index].name())
    }
}

/// Builds a tuple of a parameter pack's types from erased values, in order.
struct PackReader: ~Copyable {
    private let values: [any Sendable]
    private var index = 0

    init(_ values: [any Sendable]) { self.values = values }

    mutating func next<Value>(_: Value.Type) -> Value {
        defer { index += 1 }
        guard let value = values[index] as? Value else {
            preconditionFailure("PackReader: value \(index) is not a \(Value.self)")
        }
        return value
    }
}
