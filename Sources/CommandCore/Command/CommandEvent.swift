/// One event of a command's run, as its observers receive it.
///
/// A run sends any number of `.value`s, then exactly one terminal event: `.completed`, `.failed` or
/// `.cancelled`. Nothing follows the terminal event.
public enum CommandEvent<Output: Sendable>: Sendable {
    /// A value (the original's `onNext`).
    case value(Output)
    /// The run completed (the original's `onComplete`).
    case completed
    /// The run failed (the original's `onError`).
    case failed(any Error)
    /// The command was cancelled; the error says why (``CommandError/Code/cancelled``, or a dependency
    /// that failed or was cancelled).
    case cancelled(CommandError)

    /// True for `.completed`, `.failed` and `.cancelled`.
    public var isTerminal: Bool {
        if case .value = self { return false }
        return true
    }

    /// The value of a `.value` event.
    public var value: Output? {
        if case .value(let value) = self { return value }
        return nil
    }

    /// The error of a `.failed` or `.cancelled` event.
    public var error: (any Error)? {
        switch self {
        case .failed(let error): return error
        case .cancelled(let error): return error
        case .value, .completed: return nil
        }
    }
}

/// Where a command is in its life.
///
/// `pending` (created, or executed and waiting for its dependencies or its queue) -> `executing`
/// (`run` was called) -> one of `completed`, `failed`, `cancelled`. A command cancelled, or whose
/// dependency failed, before it ran goes from `pending` straight to `cancelled`.
///
/// `Operation`'s flags agree with it: `isExecuting` is true exactly in `executing`, `isCancelled`
/// exactly in `cancelled`, and `isFinished` in the three terminal states, with one exception written
/// down by Foundation itself: a command cancelled after it was handed to its `OperationQueue` but
/// before that queue started it reports `cancelled` at once and `isFinished` when the queue starts it
/// (Foundation's queue must start every operation it holds; on the command's own queue that is
/// immediate).
public enum CommandState: Sendable, CustomStringConvertible {
    case pending
    case executing
    case completed
    case failed(any Error)
    case cancelled(CommandError)

    /// True in `completed`, `failed` and `cancelled`.
    public var isTerminal: Bool {
        switch self {
        case .pending, .executing: return false
        case .completed, .failed, .cancelled: return true
        }
    }

    public var description: String {
        switch self {
        case .pending: return "pending"
        case .executing: return "executing"
        case .completed: return "completed"
        case .failed(let error): return "failed(\(error))"
        case .cancelled(let error): return "cancelled(\(error.code))"
        }
    }
}
