import CommandCore
import Foundation

/// The enqueued runs of one store waiting for a worker to record their end: one watch for all of them
/// (10,000 enqueued runs make one batched read per look, not 10,000 reads), looking when the store tells
/// of a run's end (routed here by the store's one subscription to its feed) and at the backstop's pace
/// otherwise.
///
/// A run's `ended` is called once, on a global queue (the store's read's completion), with the run as
/// recorded; or, if the store failed to read, with the error. `forget` drops a run (its cancel).
final class AwaitedRuns: Sendable {
    private let storage: SQLStorage
    private let poller: Poller
    // Guards the runs awaited, by id, and whether the poller started (with the first run).
    private let state = Locked<(waiting: [String: @Sendable (Result<StoredRun, any Error>) -> Void], started: Bool)>(
        ([:], false))

    init(storage: SQLStorage) {
        self.storage = storage
        poller = Poller(backstop: storage.backstop)
    }

    deinit { poller.stop() }

    /// The store told of a change (its one subscription to its feed routes them here): a run ended.
    func changed(_ change: StoreChange) {
        if case .ended = change { poller.poke() }
    }

    /// Calls `ended` once run `id` ended.
    func await(_ id: String, ended: @escaping @Sendable (Result<StoredRun, any Error>) -> Void) {
        let first = state.withLock { state -> Bool in
            state.waiting[id] = ended
            defer { state.started = true }
            return !state.started
        }
        if first {
            poller.start { [weak self] done in
                guard let self else { return done() }
                look(done)
            }
        } else {
            poller.poke()
        }
    }

    /// How many runs are watched.
    var count: Int { state.withLock { $0.waiting.count } }

    func forget(_ id: String) {
        _ = state.withLock { $0.waiting.removeValue(forKey: id) }
    }

    private func look(_ done: @escaping @Sendable () -> Void) {
        let ids = state.withLock { Array($0.waiting.keys) }
        guard !ids.isEmpty else { return done() }
        storage.endedRuns(among: ids) { [self] answer in
            defer { done() }
            switch answer {
            case .success(let runs):
                for run in runs {
                    state.withLock { $0.waiting.removeValue(forKey: run.id) }?(.success(run))
                }
            case .failure(let error):
                let all = state.withLock { state in
                    defer { state.waiting = [:] }
                    return Array(state.waiting.values)
                }
                for ended in all { ended(.failure(error)) }
            }
        }
    }
}
