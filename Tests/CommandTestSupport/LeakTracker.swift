import CommandCore
import Dispatch
import Foundation

/// Proves a finished graph was released: tracks every command reachable from the roots given (their
/// dependencies and combinator inputs), and waits, without polling and without blocking a thread,
/// until each one's `deinit` has run.
///
/// ```swift
/// let tracker = LeakTracker()
/// do {
///     let graph = combineLatest(a, b.map { $0 })
///     tracker.track(graph)
///     _ = try await graph.value
/// }
/// #expect(await tracker.waitForRelease() == [])   // names of the commands still alive
/// ```
public final class LeakTracker: Sendable {
    private struct State {
        var alive: [ObjectIdentifier: String] = [:]
        var waiter: CheckedContinuation<Void, Never>?
    }

    // Guards the table of live commands and the waiter.
    private let state = Locked(State())

    public init() {}

    /// Tracks `root` and every command it holds, transitively.
    public func track(_ root: Operation) {
        var stack = [root]
        var seen = Set<ObjectIdentifier>()
        while let operation = stack.popLast() {
            guard seen.insert(ObjectIdentifier(operation)).inserted, let command = operation as? any CommandFace
            else { continue }
            let id = ObjectIdentifier(command)
            let name = command.displayName
            let added = state.withLock { state -> Bool in
                guard state.alive[id] == nil else { return false }
                state.alive[id] = name
                return true
            }
            if added { command.onRelease { [self] in released(id) } }
            stack += command.heldCommands
        }
    }

    /// The number of tracked commands not yet released.
    public var aliveCount: Int { state.withLock { $0.alive.count } }

    /// Waits until every tracked command was released, or `seconds` passed; returns the names of
    /// those still alive (empty when nothing leaked).
    public func waitForRelease(seconds: Double = 30) async -> [String] {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.alive.isEmpty { return true }
                state.waiter = continuation
                return false
            }
            if done { return continuation.resume() }
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume()
            }
        }
        return state.withLock { $0.alive.values.sorted() }
    }

    private func released(_ id: ObjectIdentifier) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.alive[id] = nil
            guard state.alive.isEmpty else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
