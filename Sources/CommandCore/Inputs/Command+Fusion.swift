import Foundation

// Operator fusion, the engine's half: a stateless one-input stage (`map`, `filter`, `compactMap`,
// built in CommandGraph) keeps a description of what it does to a value (its *stage*), and the node
// consuming it may run that stage inside its own value handler instead of observing it, when nothing
// else can ever see the stage: its consumer holds the only strong reference to it and it was never
// touched (pending, no observer, no edge, no condition, no queue). Such a stage has no other way to be
// executed, observed or cancelled, so running it inside its consumer is indistinguishable from running
// it as a node, except that it costs no lock, no observer mailbox and no `Operation` per value.
extension Command {
    /// What a consumer may run in place of this command (CommandGraph's stage object), set once when
    /// the command is made, before anyone else has it.
    package var fusibleStage: (any AnyObject & Sendable)? {
        get { machine.withLock { $0.fusibleStage } }
        set { machine.withLock { $0.fusibleStage = newValue } }
    }

    /// This command's only held input, taken out of the inputs it keeps alive (the caller keeps it
    /// now), and whether that reference is the only strong one left; nil if it holds not exactly one.
    /// Weak references do not count (they cannot bring back a command that is released).
    ///
    /// On Apple platforms `isKnownUniquelyReferenced` may answer false for an `NSObject` subclass;
    /// fusion then does not happen there, and nothing else changes.
    package func takeHeldInput() -> (input: Operation, sole: Bool)? {
        var taken: Operation? = machine.withLock { machine in
            machine.inputs.count == 1 ? machine.inputs.removeLast() : nil
        }
        if taken == nil { return nil }
        let sole = isKnownUniquelyReferenced(&taken)
        return (taken!, sole)
    }

    /// Keeps `input` alive until this command ends, like the inputs it was made with; `linked`: also
    /// record it for pictures of the graph (an input given back after ``takeHeldInput()`` is already).
    package func hold(input: Operation, linked: Bool) {
        machine.withLock { machine in
            if linked { machine.retain(inputs: [input]) } else { machine.inputs.append(input) }
        }
    }

    /// This command's stage, if it was never touched (see the top of this file); the caller holds the
    /// only reference to it. The command never runs: it is released by the caller.
    package func claimForFusion() -> (any AnyObject & Sendable)? {
        machine.withLock { $0.isPristine ? $0.fusibleStage : nil }
    }
}

extension CommandStateMachine {
    /// Never executed, observed, given an edge, a condition, a queue, progress or a misuse.
    var isPristine: Bool {
        guard case .pending = lifecycle else { return false }
        return observers.isEmpty && consumers == 0 && !pinned && !startedExternally && dependencies.isEmpty
            && dependents.isEmpty && gate == nil && misuse == nil && progress == nil
            && queue.executeQueue == nil && queue.underlying == nil && log.endIndex == 0
    }
}
