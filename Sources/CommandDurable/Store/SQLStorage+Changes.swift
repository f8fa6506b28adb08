import CommandCore
import Foundation

/// What a store does for ``DurableStore/changes(_:)`` across processes: while this process has a stream
/// it is recorded as a watcher (a row with a lease, renewed every 3 s) and reads what the others publish;
/// while another process watches, this one publishes its changes.
final class ChangeWatch: Sendable {
    struct State {
        /// Reads what the others publish (nil while this process has no stream).
        var poller: Poller?
        /// The last change read (SQLite's changes table).
        var lastSeq: Int64?
        /// `PRAGMA data_version` at the last read: unchanged, nothing was committed by another connection.
        var dataVersion: Int64?
        /// When the watcher row was last renewed, by the database's clock.
        var renewed: Double = 0
        var lastPrune: Double = 0
    }

    // Guards the watch's poller and positions.
    let state = Locked(State())

    /// A watcher row's lease: a process that stopped without removing it stops counting after it.
    static let lease: Double = 10
    /// Changes older than this are deleted from SQLite's table (a stream reads them within its look).
    static let kept: Double = 600
    /// The longest error text published (a PostgreSQL notification holds 8,000 bytes).
    static let errorLimit = 1_000
}

extension SQLStorage {
    /// This process's first stream: it is recorded as a watcher (the others publish from their next
    /// look, within 1 s) and reads what they publish: SQLite's table at each look that finds the file
    /// changed (`PRAGMA data_version`); a server's notifications arrive by themselves.
    func startWatching() {
        let poller = Poller(backstop: notifiesEveryProcess ? .seconds(1) : backstop)
        let previous = watch.state.withLock { state -> Poller? in
            defer {
                state.poller = poller
                state.renewed = 0
            }
            return state.poller
        }
        previous?.stop()
        poller.start { [weak self] done in
            guard let self else { return done() }
            lookForChanges(done)
        }
    }

    /// This process's last stream ended: its watcher row is removed.
    func stopWatching() {
        watch.state.withLock { state -> Poller? in
            defer { state.poller = nil }
            return state.poller
        }?.stop()
        thread.submit(
            write: true,
            { [owner] connection in
                try connection.query("DELETE FROM watchers WHERE owner = ?", [.text(owner)])
            }, completion: { _ in })
    }

    /// Renews the watcher row when due; on SQLite, reads the changes the others published since the last
    /// read, when the file changed.
    private func lookForChanges(_ done: @escaping @Sendable () -> Void) {
        let now = Date().timeIntervalSince1970
        let renew = watch.state.withLock { now - $0.renewed >= 3 }
        let server = notifiesEveryProcess
        let (owner, watch, thread) = (owner, watch, thread)
        thread.submit(
            write: renew,
            { connection -> [DurableChange] in
                if renew {
                    let now = thread.now
                    try connection.query(
                        """
                        INSERT INTO watchers(owner, until) VALUES (?, ?)
                        ON CONFLICT(owner) DO UPDATE SET until = excluded.until
                        """, [.text(owner), .real(now + ChangeWatch.lease)])
                    watch.state.withLock { $0.renewed = Date().timeIntervalSince1970 }
                }
                if server { return [] }
                let version = try connection.query("PRAGMA data_version").first?[0].int
                let (last, seen) = watch.state.withLock { ($0.lastSeq, $0.dataVersion) }
                guard let last else {
                    let top = try connection.query("SELECT COALESCE(MAX(seq), 0) FROM changes").first?[0].int ?? 0
                    watch.state.withLock {
                        $0.lastSeq = top
                        $0.dataVersion = version
                    }
                    return []
                }
                if version != nil && version == seen { return [] }
                let rows = try connection.query(
                    "SELECT seq, change FROM changes WHERE seq > ? AND owner <> ? ORDER BY seq LIMIT 1000",
                    [.integer(last), .text(owner)])
                watch.state.withLock { state in
                    state.lastSeq = rows.last?[0].int ?? last
                    // A full page: the next look reads on, whatever the version.
                    state.dataVersion = rows.count == 1000 ? nil : version
                }
                let decoder = JSONDecoder()
                return rows.compactMap { row in
                    row[1].string.flatMap { try? decoder.decode(DurableChange.self, from: Data($0.utf8)) }
                }
            },
            completion: { [observers] result in
                if case .success(let changes) = result { observers.received(changes) }
                done()
            })
    }

    /// Whether another process watches (read once a second by the store's look): this process's changes
    /// are then published.
    func refreshWatched() {
        let owner = owner
        let thread = thread
        thread.submit(
            write: false,
            { connection in
                try !connection.query(
                    "SELECT 1 FROM watchers WHERE until > ? AND owner <> ? LIMIT 1", [.real(thread.now), .text(owner)]
                ).isEmpty
            },
            completion: { [observers] result in
                if case .success(let watched) = result { observers.setWatched(watched) }
            })
    }

    /// Publishes the changes waiting, in one transaction: rows of SQLite's changes table (older ones
    /// pruned once a minute), or notifications of at most about 6,000 bytes each on a server.
    func publishPending() {
        let (owner, watch, thread, observers) = (owner, watch, thread, observers)
        let server = notifiesEveryProcess
        thread.submit(
            write: true,
            { [self] connection in
                let changes = observers.takePending().map(Self.published)
                guard !changes.isEmpty else { return }
                let encoder = JSONEncoder()
                if server {
                    // Sized by each change's JSON; the notification encodes its chunk as one array.
                    var chunk: [DurableChange] = []
                    var size = 0
                    for change in changes {
                        let length = (try? encoder.encode(change).count) ?? 0
                        if !chunk.isEmpty && size + length > 6_000 {
                            try notify(.published(chunk), connection)
                            (chunk, size) = ([], 0)
                        }
                        chunk.append(change)
                        size += length + 1
                    }
                    if !chunk.isEmpty { try notify(.published(chunk), connection) }
                    return
                }
                for change in changes {
                    let json = String(decoding: try encoder.encode(change), as: UTF8.self)
                    try connection.query(
                        "INSERT INTO changes(time, kind, change, owner) VALUES (?, ?, ?, ?)",
                        [
                            .real(change.time.timeIntervalSince1970), .text(change.kind.rawValue), .text(json),
                            .text(owner),
                        ])
                }
                let now = thread.now
                let prune = watch.state.withLock { state -> Bool in
                    guard now - state.lastPrune >= 60 else { return false }
                    state.lastPrune = now
                    return true
                }
                if prune {
                    try connection.query("DELETE FROM changes WHERE time < ?", [.real(now - ChangeWatch.kept)])
                }
            }, completion: { _ in })
    }

    /// Run `id`'s tags (nil: no such run).
    func runTags(_ id: String) async throws -> Set<String>? {
        try await wrap {
            try await thread.perform(write: false) { connection in
                try connection.query("SELECT tags FROM runs WHERE id = ?", [.text(id)]).first.map {
                    DurableRunOptions.tags(recorded: $0[0].string)
                }
            }
        }
    }

    /// A change as published: its error cut to ``ChangeWatch/errorLimit`` characters.
    private static func published(_ change: DurableChange) -> DurableChange {
        guard let error = change.error, error.count > ChangeWatch.errorLimit else { return change }
        return DurableChange(
            kind: change.kind, run: change.run, workflow: change.workflow, step: change.step, attempt: change.attempt,
            owner: change.owner, time: change.time, duration: change.duration,
            error: String(error.prefix(ChangeWatch.errorLimit)) + "…", state: change.state, context: change.context,
            queued: change.queued)
    }
}
