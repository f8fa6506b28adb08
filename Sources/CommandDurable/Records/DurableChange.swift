import CommandCore
import Dispatch
import Foundation

/// Something that happened to a run or one of its steps, as a ``DurableObserver`` hears of it.
public struct DurableChange: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        /// A run was recorded (started, enqueued, a schedule's slot, a child run).
        case runCreated
        /// An attempt of a step began (its command made, or its wait begun).
        case stepStarted
        case stepCompleted
        /// A step failed for good.
        case stepFailed
        /// A step's attempt failed and it will be tried again.
        case stepRetrying
        /// A step another owner held (its lease expired, or its process is gone) was taken over here.
        case stepTakenOver
        /// A run ended: completed, failed or cancelled (`state`).
        case runEnded
    }

    public let kind: Kind
    public let run: String
    /// The step's id, for a step's change.
    public let step: String?
    /// The attempt, for a step's change.
    public let attempt: Int?
    /// The store that made the change (``DurableStore/owner``).
    public let owner: String
    public let time: Date
    /// How long the attempt ran, for `stepCompleted`, `stepFailed` and `stepRetrying`.
    public let duration: Duration?
    /// The error, for `stepFailed` and `stepRetrying`.
    public let error: String?
    /// The run's end, for `runEnded`.
    public let state: DurableRunState?

    public var description: String {
        var text = "\(kind.rawValue) \(run)"
        if let step { text += "/\(step)" }
        if let attempt { text += " #\(attempt)" }
        if let state { text += " \(state.rawValue)" }
        return text
    }
}

/// Hears of the changes of the runs of a store in this process (``DurableStore/add(observer:)``): the
/// runs this process records, the steps it runs, the ends of the runs it works or awaits. Held weakly.
///
/// **Threads and order.** Called on one serial queue of the store's (never its thread, never a lock held),
/// so one observer's calls never overlap and come in the order the changes were made here: a run's
/// `runCreated`, then each step's `stepStarted` before its end, then `runEnded`.
public protocol DurableObserver: AnyObject, Sendable {
    func store(_ store: DurableStore, observed change: DurableChange)
}

/// A store's observers, and the one serial queue that calls them.
final class DurableObservers: Sendable {
    private struct Entry {
        weak var observer: (any DurableObserver)?
    }

    // Guards the observers, by identity (held weakly: a released observer is dropped).
    private let entries = Locked<[ObjectIdentifier: Entry]>([:])
    private let queue = DispatchQueue(label: "AwesomeCommand.DurableObservers")
    // Guards the store the observers are told of (set once it exists; weak: the store owns this).
    private let store = Locked<WeakStore>(WeakStore())

    private struct WeakStore {
        weak var store: DurableStore?
    }

    var isEmpty: Bool { entries.withLock { $0.isEmpty } }

    func attach(_ store: DurableStore) { self.store.withLock { $0.store = store } }

    func add(_ observer: any DurableObserver) {
        entries.withLock { $0[ObjectIdentifier(observer)] = Entry(observer: observer) }
    }

    func remove(_ observer: any DurableObserver) {
        _ = entries.withLock { $0.removeValue(forKey: ObjectIdentifier(observer)) }
    }

    /// Tells every observer of `change`, on the observers' queue.
    func emit(
        _ kind: DurableChange.Kind, run: String, step: String? = nil, attempt: Int? = nil, owner: String,
        duration: Duration? = nil, error: String? = nil, state: DurableRunState? = nil
    ) {
        guard !isEmpty else { return }
        let change = DurableChange(
            kind: kind, run: run, step: step, attempt: attempt, owner: owner, time: Date(), duration: duration,
            error: error, state: state)
        queue.async { [self] in
            guard let store = store.withLock({ $0.store }) else { return }
            let observers = entries.withLock { entries in
                entries = entries.filter { $0.value.observer != nil }
                return entries.values.compactMap(\.observer)
            }
            for observer in observers { observer.store(store, observed: change) }
        }
    }
}
