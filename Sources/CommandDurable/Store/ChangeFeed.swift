import CommandCore
import Dispatch
import Foundation

/// What changed in a store, told to its subscribers (workers, runs awaiting an end) so they read it at
/// once instead of at their next backstop poll.
package enum StoreChange: Equatable, Sendable {
    /// Steps may have become ready (a run recorded, a step ended).
    case ready
    /// The run ended (completed, failed or cancelled).
    case ended(run: String)
    /// The run's cancel was recorded.
    case cancelled(run: String)
    /// A value was sent to one of the run's events.
    case event(run: String)
    /// The run's deadline passed: it is recorded failed, its steps stopped.
    case deadline(run: String)
    /// Changes another process published for the streams of a process watching (``DurableChange``).
    case published([DurableChange])

    /// As sent between processes (a notification's payload).
    package var payload: String {
        switch self {
        case .ready: return "ready"
        case .ended(let run): return "ended:\(run)"
        case .cancelled(let run): return "cancelled:\(run)"
        case .event(let run): return "event:\(run)"
        case .deadline(let run): return "deadline:\(run)"
        case .published(let changes):
            let json = (try? JSONEncoder().encode(changes)).flatMap { String(data: $0, encoding: .utf8) }
            return "changes:" + (json ?? "[]")
        }
    }

    /// A notification's payload, `"<origin store> <change>"`: the change, unless `origin` is `ignoring`.
    package init?(notification: String, ignoring origin: String) {
        guard let space = notification.firstIndex(of: " ") else { return nil }
        guard notification[..<space] != origin[...] else { return nil }
        self.init(payload: String(notification[notification.index(after: space)...]))
    }

    package init?(payload: String) {
        if payload == "ready" {
            self = .ready
        } else if payload.hasPrefix("ended:") {
            self = .ended(run: String(payload.dropFirst(6)))
        } else if payload.hasPrefix("cancelled:") {
            self = .cancelled(run: String(payload.dropFirst(10)))
        } else if payload.hasPrefix("event:") {
            self = .event(run: String(payload.dropFirst(6)))
        } else if payload.hasPrefix("deadline:") {
            self = .deadline(run: String(payload.dropFirst(9)))
        } else if payload.hasPrefix("changes:") {
            guard let changes = try? JSONDecoder().decode([DurableChange].self, from: Data(payload.utf8.dropFirst(8)))
            else { return nil }
            self = .published(changes)
        } else {
            return nil
        }
    }
}

/// The subscribers to a store's changes. `post` calls each on a global queue, never under the lock, with
/// the change and whether it was heard from another process (a notification) rather than made here.
package final class ChangeFeed: Sendable {
    // Guards the subscribers, by token.
    private let subscribers = Locked<(next: Int, handlers: [Int: @Sendable (StoreChange, Bool) -> Void])>((0, [:]))

    package init() {}

    /// Calls `handler` with each change from now on, until the token is cancelled.
    func subscribe(_ handler: @escaping @Sendable (StoreChange, _ heard: Bool) -> Void) -> any Cancelable {
        let token = subscribers.withLock { state -> Int in
            state.next += 1
            state.handlers[state.next] = handler
            return state.next
        }
        return BlockCancelable { [weak self] in
            _ = self?.subscribers.withLock { $0.handlers.removeValue(forKey: token) }
        }
    }

    package func post(_ change: StoreChange, heard: Bool = false) {
        let handlers = subscribers.withLock { Array($0.handlers.values) }
        guard !handlers.isEmpty else { return }
        DispatchQueue.global().async {
            for handler in handlers { handler(change, heard) }
        }
    }
}
