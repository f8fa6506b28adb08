import CommandCore
import Foundation

// How an answer crosses from the store's thread to whoever waits for it: a task (a continuation) or a
// thread of its own (a pthread condition).

/// An awaiting caller's answer: resumed once, by the store's thread (the result), by the deadline, or by
/// the task's cancel, whichever comes first; a cancel that comes before the continuation is set ends the
/// await as soon as it is.
final class AwaitedAnswer<T: Sendable>: Sendable {
    private enum Slot {
        case waiting
        case set(CheckedContinuation<T, any Error>)
        case answered
        case cancelledEarly
    }

    // Guards the slot.
    private let slot = Locked<Slot>(.waiting)

    /// Stores the continuation; false (and resumed) when the task was cancelled already.
    func set(_ continuation: CheckedContinuation<T, any Error>) -> Bool {
        let early = slot.withLock { slot -> Bool in
            if case .cancelledEarly = slot {
                slot = .answered
                return true
            }
            slot = .set(continuation)
            return false
        }
        if early { continuation.resume(throwing: CancellationError()) }
        return !early
    }

    var isAnswered: Bool {
        slot.withLock { slot in
            switch slot {
            case .answered, .cancelledEarly: return true
            default: return false
            }
        }
    }

    func resume(_ result: Result<T, any Error>) {
        let continuation = slot.withLock { slot -> CheckedContinuation<T, any Error>? in
            switch slot {
            case .set(let continuation):
                slot = .answered
                return continuation
            case .waiting:
                if case .failure(let error) = result, error is CancellationError { slot = .cancelledEarly }
                return nil
            default:
                return nil
            }
        }
        continuation?.resume(with: result)
    }
}

/// One result handed from the store's thread to a caller waiting for it (a pthread condition, which
/// ThreadSanitizer understands).
package final class ResultBox<T>: @unchecked Sendable {
    // `@unchecked Sendable`: `result` is guarded by `condition`.
    private let condition = NSCondition()
    private var result: Result<T, any Error>?

    package init() {}

    package func put(_ result: Result<T, any Error>) {
        condition.lock()
        self.result = result
        condition.signal()
        condition.unlock()
    }

    package func take() -> Result<T, any Error> {
        condition.lock()
        defer { condition.unlock() }
        while result == nil { condition.wait() }
        return result!
    }
}
