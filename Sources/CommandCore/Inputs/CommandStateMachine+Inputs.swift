import Foundation

// The input half of the state machine: the combinator inputs a command holds (strongly while it
// runs, weakly for reports), and the commands it subscribed at run time.
extension CommandStateMachine {
    mutating func retain(inputs more: [Operation]) {
        inputs += more
        inputLinks += more.map(Weak<Operation>.init)
    }

    var heldOperations: [Operation] { dependencies.array + inputs }

    /// Records a command subscribed at run time. Entries whose command was released are dropped
    /// whenever the list doubles, so an endless `flatMap` keeps only about twice its live inners.
    mutating func recordRunTimeInput(_ operation: Operation) {
        if runTimeLinks.count >= 8 && runTimeLinks.count.nonzeroBitCount == 1 {
            runTimeLinks.removeAll { $0.object == nil }
        }
        runTimeLinks.append(Weak<Operation>(operation))
    }

    /// The inputs, also after they were released (while something else keeps them alive).
    var inputOperations: [Operation] { inputLinks.compactMap(\.object) }

    /// Empties the input list (when the command is released).
    @inline(__always)
    mutating func takeInputs() -> [Operation] {
        defer { inputs = [] }
        return inputs
    }
}
