import Foundation

// Where a command is in its life, how it ended, and what an ending leaves to do once the lock is
// released.

/// Where a command is in its life (see ``CommandStateMachine``); not generic, so unspecialised code
/// pays no metadata lookup for it.
enum Lifecycle: Sendable {
    case pending
    /// Owned by the execute walk `walk`; `onStack` while its dependencies are being walked.
    case claimed(walk: UInt64, onStack: Bool)
    /// Registered with its dependencies; `remaining` of them (plus one hold while registering)
    /// have not finished.
    case waiting(remaining: Int)
    /// Handed to its queue; `start()` not called yet.
    case enqueued
    case executing
    /// Ended (cancelled) before anything started or executed it: like a cancelled Foundation
    /// operation, `isFinished` turns true when something starts it (the queue holding it, `start()`,
    /// `execute`).
    case endedBeforeStart(Termination)
    case finished(Termination)
}

/// How a command ended; the non-generic part of a terminal event, shared with dependents (and with
/// CommandGraph, which takes a finished `flatMap` inner's ending this way).
package enum Termination: Sendable {
    case completed
    case failed(any Error)
    case cancelled(CommandError)

    var isSuccess: Bool {
        if case .completed = self { return true }
        return false
    }

    var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }

    var state: CommandState {
        switch self {
        case .completed: return .completed
        case .failed(let error): return .failed(error)
        case .cancelled(let error): return .cancelled(error)
        }
    }

    func event<Output>(_: Output.Type = Output.self) -> CommandEvent<Output> {
        switch self {
        case .completed: return .completed
        case .failed(let error): return .failed(error)
        case .cancelled(let error): return .cancelled(error)
        }
    }
}

// Non-generic, like every value the state machine returns: a generic nested type costs a metadata
// look-up per use in the unspecialised `Command<Output>`.

/// Everything to do after a command ended, outside the lock.
struct Ending: Sendable {
    let outcome: Termination
    /// Was executing: post `isExecuting` as well.
    let wasExecuting: Bool
    /// Post `isFinished` now (false while a queue still has to start it).
    let postFinished: Bool
    /// Cancel this (the run's cancelable, an `any Cancelable` kept as its object) when the ending is a
    /// cancel (cast back where it is cancelled, in `Command.performLocally(_:)`).
    let cancelable: (any AnyObject & Sendable)?
    let dependents: RefList<CommandNode>
    let wakeups: Wakeups
    /// A combinator's inputs, released (with a loop) once the ending was performed.
    let inputs: [Operation]
    /// The command's progress, completed after the lock is released (see ``ProgressGuard``).
    let progress: Progress?
    /// Its gate's evaluation to cancel and categories to release, if it has conditions.
    let gate: GateCleanup?
    /// Its lifecycle observers (empty for most commands): told before and after the ending.
    let observers: [any CommandObserver]
    /// The graph or group watching its end, told once its observers' wake-ups are scheduled.
    let endWatch: EndWatch?
}
