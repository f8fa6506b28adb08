import Foundation

// A combinator's inputs: held until it ends, and recorded for pictures and stall reports.
extension Command {
    /// Every command this one holds: its dependencies and a combinator's inputs (for graph walks in
    /// tests and tools).
    package var heldCommands: [Operation] { machine.withLock { $0.heldOperations } }

    /// A combinator's inputs still held (released when it ends).
    package var inputCommands: [Operation] { machine.withLock { $0.inputOperations } }

    /// The commands a combinator subscribed to while running and still alive (see
    /// ``recordRunTimeInput(_:)``).
    package var runTimeInputs: [Operation] { machine.withLock { $0.runTimeLinks.compactMap(\.object) } }

    /// Records `operation` as subscribed at run time by this combinator (the next command of
    /// `then { }`, a `flatMap` inner, a `catch` recovery, a `retry` attempt), for pictures and stall
    /// reports. Held weakly.
    package func recordRunTimeInput(_ operation: Operation) {
        machine.withLock { $0.recordRunTimeInput(operation) }
    }

    /// Keeps `inputs` alive until this command ends (released with a loop, so a long chain of
    /// combinators is freed without recursion).
    package func retain(inputs: [Operation]) {
        machine.withLock { $0.retain(inputs: inputs) }
    }
}
