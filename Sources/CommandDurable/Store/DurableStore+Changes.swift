import CommandCore
import Foundation

extension DurableStore {
    /// The changes of the store's runs from now on, as they happen, in every process that has the store
    /// open: the runs recorded, each attempt of each step begun and ended, the runs' ends.
    ///
    /// ```swift
    /// for await change in store.changes(.workflow("upload")) {
    ///     if change.kind == .runEnded { await reloadPendingUploads() }
    /// }
    /// ```
    ///
    /// **Where the changes come from.** This process's at once. Another process's once it knows that one
    /// watches: a process with a stream is recorded as a watcher (a row with a 10 s lease, renewed every
    /// 3 s, removed when its last stream ends), and every store looks for watchers once a second; until it
    /// has looked, its changes are not published (so a stream sees another process's changes from at most
    /// about 1 s after it began). While one watches, each process publishes its changes after its commits,
    /// in batches (those of 5 ms together): through `NOTIFY` on PostgreSQL, on SQLite as rows of a small table (kept 10 minutes)
    /// that each watching process reads when `PRAGMA data_version` says another connection wrote (one
    /// look per store at its backstop pace, 50 ms, not one per stream). A store nobody watches publishes
    /// nothing: its steps pay nothing for this. Published errors are cut to 1,000 characters.
    ///
    /// **Order.** One process's changes arrive in the order it made them (a run's `runCreated`, then each
    /// step's `stepStarted` before its end, then `runEnded`); between processes, in the order they reached
    /// this one. A run worked by two processes can show one's `stepCompleted` before the other's
    /// `stepStarted` of a later step only when the two were published in different batches.
    ///
    /// **Filter.** `filter.workflow` and `filter.tags` select the runs (a run's tags read once per run);
    /// the other fields describe a listing (states, dates, a page) and are not used here.
    ///
    /// **Ending.** Breaking out of the loop, or cancelling the task iterating it, ends the subscription
    /// (and this process's watch with its last stream); closing the store ends the sequence. Iterate it
    /// once (one sequence, one consumer); a consumer more than 10,000 changes behind loses the oldest.
    public func changes(_ filter: DurableRunFilter = .all) -> DurableChanges {
        let observers = storage.observers
        let storage = storage
        let token = Locked<Int?>(nil)
        // Ends the subscription once: at the loop's end (the iterator released), a cancel, the store's close.
        let end: @Sendable () -> Void = {
            guard
                let ended = token.withLock({ token -> Int? in
                    defer { token = nil }
                    return token
                })
            else { return }
            if observers.removeStream(ended) { storage.stopWatching() }
        }
        let stream = AsyncStream(DurableChange.self, bufferingPolicy: .bufferingNewest(10_000)) { continuation in
            let (added, first) = observers.addStream(
                DurableObservers.Sink(
                    yield: { continuation.yield($0) }, finish: { continuation.finish() }))
            token.withLock { $0 = added }
            continuation.onTermination = { _ in end() }
            if first { storage.startWatching() }
        }
        return DurableChanges(stream: stream, filter: filter, store: self, end: end)
    }

    /// The streams of ``changes(_:)`` open in this process (the tests').
    package var changeStreamCount: Int { storage.observers.streamCount }

    /// Whether run `id` has every tag of `tags` (read from its record; false for a run pruned already).
    fileprivate func hasTags(_ id: String, _ tags: Set<String>) async -> Bool {
        guard let record = try? await storage.runTags(id) else { return false }
        return tags.isSubset(of: record)
    }
}

/// The changes of a store's runs as they happen (``DurableStore/changes(_:)``): an `AsyncSequence` of
/// ``DurableChange``, to iterate once. It never throws; it ends when the store closes.
public struct DurableChanges: AsyncSequence, Sendable {
    public typealias Element = DurableChange

    let stream: AsyncStream<DurableChange>
    let filter: DurableRunFilter
    let store: DurableStore
    let end: @Sendable () -> Void

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: stream.makeAsyncIterator(), filter: filter, store: store, life: Life(end: end))
    }

    /// Ends the subscription when the iterator is released (the loop left), whoever still holds the
    /// sequence.
    final class Life: Sendable {
        let end: @Sendable () -> Void
        init(end: @escaping @Sendable () -> Void) { self.end = end }
        deinit { end() }
    }

    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<DurableChange>.Iterator
        let filter: DurableRunFilter
        let store: DurableStore
        let life: Life
        /// Whether each run seen has the filter's tags.
        var tagged: [String: Bool] = [:]

        public mutating func next() async -> DurableChange? {
            while let change = await base.next() {
                if let workflow = filter.workflow, change.workflow != workflow { continue }
                if let tags = filter.tags, !tags.isEmpty {
                    let matches: Bool
                    if let known = tagged[change.run] {
                        matches = known
                    } else {
                        matches = await store.hasTags(change.run, tags)
                        tagged[change.run] = matches
                    }
                    if !matches { continue }
                }
                return change
            }
            return nil
        }
    }
}
