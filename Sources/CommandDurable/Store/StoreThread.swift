import CommandCore
import Dispatch
import Foundation

/// The store's own thread: every database call of a store runs here, never on a command's queue, the
/// Dispatch pool or the concurrency pool (a `FULL` commit waits for the disk; a server's answer waits for
/// the network).
///
/// Group commit: the thread takes every request waiting and writes them in one `BEGIN IMMEDIATE ...
/// COMMIT` (when one of them throws, the batch is run again with each inside a savepoint, so that one
/// request's failure undoes that request only); while one commit
/// waits for the disk, the next batch gathers. Completions are called after the commit: an engine
/// callback on a global Dispatch queue (never on this thread, so no command code runs here) or, for the
/// step command's hand-over, on the thread itself; an awaiting caller's continuation is resumed.
///
/// **Each request is answered once.** A batch run again (a lost conflict, a lost connection) runs only
/// what was not answered yet: reads answered before the writes began are not run, nor answered, again.
///
/// **Outages.** A lost connection is opened again with a backoff (50 ms to 2 s) until it opens or the
/// store closes: the engine's requests (claims, completions, failures, a run's end, lease renewals)
/// wait for it however long it takes. Only an awaiting caller has a deadline (`patience`) and its task's
/// cancel: past the deadline it throws ``DurableError/storage(message:)`` naming the place; cancelled, it
/// throws `CancellationError` at once. Either way a request the thread had not begun never runs; one it
/// had begun (a write in the transaction being retried) may still commit, its answer dropped.
package final class StoreThread: @unchecked Sendable {
    // `@unchecked Sendable`: `pending`, `stopping`, `lost` and `loseNextCommit` are guarded by
    // `condition`; `connection`, `conflicted`, `clockOffset` and `skew` are made and touched only by the thread.
    private struct Request {
        let write: Bool
        /// An awaiting caller's: abandoned when the connection is not back by then.
        let deadline: Date?
        /// An awaiting caller's: true once it was answered or abandoned (then it is not run).
        let answered: @Sendable () -> Bool
        /// Runs the request on the connection; returns whether it threw, and what to call once its batch
        /// ended (with the commit's failure, which replaces the request's own result).
        let perform: (any SQLDatabase) -> (threw: Bool, finish: (_ commitError: (any Error)?) -> Void)
        /// Fails the request without running it.
        let abandon: (any Error) -> Void

        func expired(_ now: Date) -> Bool { deadline.map { $0 <= now } ?? false }
    }

    private let condition = NSCondition()
    private var pending: [Request] = []
    private var stopping = false
    private var thread: Thread?
    /// Signalled once the loop ended and the connection is closed.
    private let finished = DispatchSemaphore(value: 0)
    /// Opened on the thread, then only touched there.
    private var connection: (any SQLDatabase)!
    private let open: @Sendable () throws -> any SQLDatabase
    private let begin: String
    /// Named in the errors of awaiting callers (the file, or the server without its password).
    private let place: String
    /// How long an awaiting caller waits for a lost connection.
    let patience: TimeInterval
    /// Set (on the thread) by a request whose statement lost a conflict with another transaction.
    private var conflicted = false
    /// Test hook: the next commit of a batch that holds reads and writes is lost (rolled back, the
    /// connection opened again), as if the connection broke under it.
    private var loseNextCommit = false
    /// Commits made (for the group-commit figures).
    private let commitCount = Locked(0)
    /// The database's clock minus this host's, measured at each (re)connection (0 for an embedded
    /// database): leases are judged by the database's clock, one clock for every process sharing it,
    /// whatever their hosts' clocks say. Only touched on the thread.
    private var clockOffset: TimeInterval = 0
    /// Test hook: how far this host's clock is off (added to every reading of it). Only touched on the
    /// thread.
    private var skew: TimeInterval = 0

    /// Starts the thread, which opens the connection with `open` (every database call of a store runs on
    /// its thread, opening included); throws what `open` threw (the thread then ends). `begin` begins a
    /// write transaction; `patience` bounds an awaiting caller's wait for a lost connection.
    init(
        name: String, place: String, begin: String, patience: TimeInterval = 10,
        open: @escaping @Sendable () throws -> any SQLDatabase
    ) throws {
        self.open = open
        self.begin = begin
        self.place = place
        self.patience = patience
        let opened = ResultBox<Void>()
        let thread = Thread { [self] in
            Thread.current.threadDictionary[StoreThread.marker] = true
            do {
                connection = try open()
                measureClock()
                opened.put(.success(()))
            } catch {
                opened.put(.failure(error))
                finished.signal()
                return
            }
            loop()
        }
        thread.name = name
        self.thread = thread
        thread.start()
        try opened.take().get()
    }

    /// Set in the thread dictionary of a store's thread (and of a measurement's own thread): where the
    /// database may be called (checked by each connection in debug builds).
    package static let marker = "AwesomeCommand.storeThread"

    /// Whether the current thread is a store's (or a measurement's) own.
    package static var isStoreThread: Bool { Thread.current.threadDictionary[marker] != nil }

    /// Debug builds: the database is called only on a thread of its own (a store's thread, or a
    /// measurement's), never on a command's queue, the Dispatch pool or the concurrency pool.
    @inline(__always)
    package static func checkThread() {
        assert(isStoreThread, "a store's database called outside a store's own thread (\(Thread.current))")
    }

    var commits: Int { commitCount.withLock { $0 } }

    /// Runs `body` on a thread of its own, marked as a store's (the database may be called there), and
    /// waits for it: the measurement tools' floors and seeds, never the engine's requests.
    package static func runAlone<T>(_ body: @escaping () throws -> T) throws -> T {
        let outcome = ResultBox<T>()
        nonisolated(unsafe) let work = body
        let thread = Thread {
            Thread.current.threadDictionary[marker] = true
            outcome.put(Result { try work() })
        }
        thread.start()
        return try outcome.take().get()
    }

    /// Runs `body` on a thread of its own, marked as a store's, and awaits it without blocking the
    /// caller's thread: opening a store whose opening waits for a server.
    package static func detached<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let thread = Thread {
                Thread.current.threadDictionary[marker] = true
                continuation.resume(with: Result { try body() })
            }
            thread.name = "AwesomeCommand durable store (opening)"
            thread.start()
        }
    }

    /// Runs `body` on the thread, inside a write transaction (with others: group commit) when `write`;
    /// `completion` gets its result once the transaction committed, on a global queue (`hop`) or on the
    /// thread itself (the step command's hand-over, which runs no user code). Waits for a lost
    /// connection however long it takes; fails only once the store closes.
    package func submit<T>(
        write: Bool, hop: Bool = true, _ body: @escaping (any SQLDatabase) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        let deliver: @Sendable (Result<T, any Error>) -> Void = { result in
            nonisolated(unsafe) let delivered = result
            if hop {
                DispatchQueue.global().async { completion(delivered) }
            } else {
                completion(delivered)
            }
        }
        enqueue(request(write: write, deadline: nil, answered: { false }, body, deliver: deliver)) {
            completion(.failure($0))
        }
    }

    /// Runs `body` on the thread (in a write transaction when `write`) and returns its result once
    /// committed, suspending the caller: no thread waits. Past `patience` without a connection, throws
    /// ``DurableError/storage(message:)``; a cancelled task stops waiting at once (see the type's doc).
    func perform<T: Sendable>(
        write: Bool, _ body: @escaping (any SQLDatabase) throws -> T,
        committed: (@Sendable (T) -> Void)? = nil
    ) async throws -> T {
        precondition(
            !Self.isStoreThread,
            "a durable store's async API awaited on a store's own thread: it would wait for itself")
        let answer = AwaitedAnswer<T>()
        nonisolated(unsafe) let work = body
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                guard answer.set(continuation) else { return }
                enqueue(
                    request(
                        write: write, deadline: Date().addingTimeInterval(patience), answered: { answer.isAnswered },
                        work,
                        deliver: { result in
                            // On this thread, once committed: before the caller's task resumes.
                            if case .success(let value) = result { committed?(value) }
                            answer.resume(result)
                        })
                ) { answer.resume(.failure($0)) }
            }
        } onCancel: {
            answer.resume(.failure(CancellationError()))
        }
    }

    private func request<T>(
        write: Bool, deadline: Date?, answered: @escaping @Sendable () -> Bool,
        _ body: @escaping (any SQLDatabase) throws -> T, deliver: @escaping @Sendable (Result<T, any Error>) -> Void
    ) -> Request {
        Request(
            write: write, deadline: deadline, answered: answered,
            perform: { [unowned self] connection in
                let result: Result<T, any Error>
                do { result = .success(try body(connection)) } catch {
                    if connection.isConflict(error) { conflicted = true }
                    result = .failure(error)
                }
                // The result crosses to the completion's thread once; it is not touched here afterwards.
                nonisolated(unsafe) let outcome = result
                let threw: Bool
                if case .failure = result { threw = true } else { threw = false }
                return (threw, { commitError in deliver(commitError.map { .failure($0) } ?? outcome) })
            }, abandon: { error in deliver(.failure(error)) })
    }

    private func enqueue(_ request: Request, refused: (any Error) -> Void) {
        condition.lock()
        let accepted = !stopping
        if accepted {
            pending.append(request)
            condition.signal()
        }
        condition.unlock()
        if !accepted { refused(DurableError.storage(message: "\(place): the store was closed")) }
    }

    /// Commits lost through the test hook.
    package var lostCommits: Int { condition.lock(); defer { condition.unlock() }; return lost }
    private var lost = 0

    /// Now, in seconds since 1970, by the database's clock (on the thread: the requests' bodies).
    var now: Double {
        StoreThread.checkThread()
        return hostClock + clockOffset
    }

    private var hostClock: Double { Date().timeIntervalSince1970 + skew }

    /// On the thread, after a connection opened: the database's clock against this host's (half a round
    /// trip of error).
    private func measureClock() {
        let before = hostClock
        guard let server = try? connection.serverClock() else { return }
        let after = hostClock
        clockOffset = server - (before + after) / 2
    }

    /// Test hook: this host's clock read `seconds` off from now on (measured against the database's at
    /// the next connection).
    package func skewHostClock(by seconds: TimeInterval) {
        // Set on the thread, before the requests submitted after this one.
        submit(
            write: false, hop: false,
            { [unowned self] _ in
                skew = seconds
                measureClock()
            }, completion: { _ in })
    }

    /// Test hook: loses the next commit of a batch holding reads and writes (see `loseNextCommit`).
    package func loseTheNextMixedCommit() {
        condition.lock()
        loseNextCommit = true
        condition.unlock()
    }

    /// Stops the thread once the requests waiting are done, and waits until the connection is closed
    /// (unless called on the store's thread itself, which then stops after this request).
    func stop() {
        condition.lock()
        let first = !stopping
        stopping = true
        condition.signal()
        let here = Thread.current === thread
        condition.unlock()
        if first && !here {
            finished.wait()
            finished.signal()  // later callers pass too
        }
    }

    private func loop() {
        while true {
            condition.lock()
            while pending.isEmpty && !stopping { condition.wait() }
            // Awaiting callers that gave up (cancelled, or answered by the deadline) are not run.
            let batch = pending.filter { !$0.answered() }
            pending = []
            let done = stopping && batch.isEmpty
            condition.unlock()
            if !batch.isEmpty { run(batch) }
            if done { break }
        }
        connection.close()
        finished.signal()
    }

    /// One batch, run again (what is left of it) on a new connection each time the connection is lost
    /// under it.
    private func run(_ batch: [Request]) {
        var batch = batch
        var delay: TimeInterval = 0.05
        while true {
            let outcome = attempt(&batch)
            if outcome == .done { return }
            if outcome == .conflict {
                // Lost a conflict (a deadlock with another process's transaction): rolled back; again,
                // after a short random pause so the two do not meet again.
                Thread.sleep(forTimeInterval: Double.random(in: 0.001...0.02))
                continue
            }
            // The connection is lost: open another, with a backoff, until it opens or the store closes.
            var reason = "the connection was lost"
            while true {
                connection.close()
                do {
                    connection = try open()
                    measureClock()
                    CommandLogging.log(.info, command: thread?.name ?? "store", "connection opened again")
                    break
                } catch {
                    reason = String(describing: error)
                }
                // Awaiting callers past their patience (or gone), and everything once the store closes,
                // fail now; the engine's requests wait.
                let now = Date()
                condition.lock()
                let closing = stopping
                let gone = { (request: Request) in closing || request.expired(now) || request.answered() }
                let expired = pending.filter(gone)
                pending.removeAll(where: gone)
                condition.unlock()
                let failure = DurableError.storage(
                    message: closing
                        ? "\(place): the store was closed while its connection was lost: \(reason)"
                        : "\(place): the connection was lost and is not back after \(Int(patience)) s: \(reason)")
                for request in expired { request.abandon(failure) }
                for request in batch where gone(request) { request.abandon(failure) }
                batch.removeAll(where: gone)
                if batch.isEmpty && closing { return }
                // The store's own thread: nothing else waits on it.
                Thread.sleep(forTimeInterval: delay)
                delay = min(delay * 2, 2)
            }
            batch.removeAll { $0.answered() }
            if batch.isEmpty { return }
        }
    }

    private enum Outcome { case done, lost, conflict }

    /// One batch: the reads first, each on its own, answered at once and taken out of the batch; the
    /// writes together in one transaction. No write is answered when the connection was lost under it,
    /// or when a request lost a conflict (the transaction is rolled back): what is left runs again.
    private func attempt(_ batch: inout [Request]) -> Outcome {
        var finish: [(_ commitError: (any Error)?) -> Void] = []
        var reads: [(_ commitError: (any Error)?) -> Void] = []
        let hadReads = batch.contains { !$0.write }
        for request in batch where !request.write {
            reads.append(request.perform(connection).finish)
            if connection.isLost { return .lost }
            if conflicted { return rolledBack() }
        }
        // Answered: a batch run again does not run (or answer) them again.
        batch.removeAll { !$0.write }
        for call in reads { call(nil) }
        let writes = batch
        guard !writes.isEmpty else { return .done }
        if let failed = begin(writes) { return failed }
        // A lone request needs no savepoint: if it threw, the whole transaction is rolled back.
        if writes.count == 1 {
            let (threw, completion) = writes[0].perform(connection)
            if connection.isLost { return .lost }
            if conflicted { return rolledBack() }
            if threw {
                try? connection.execute("ROLLBACK")
                completion(nil)
                return .done
            }
            finish.append(completion)
        } else {
            // Together without savepoints (each costs two round trips on a server); only when one of
            // them threw is the batch rolled back and run again with a savepoint each, so that the one
            // failure undoes that request only.
            var threw = false
            for request in writes {
                let (failed, completion) = request.perform(connection)
                if connection.isLost { return .lost }
                if conflicted { return rolledBack() }
                if failed {
                    threw = true
                    break
                }
                finish.append(completion)
            }
            if threw {
                finish = []
                try? connection.execute("ROLLBACK")
                if let failed = begin(writes) { return failed }
                for request in writes {
                    guard runInSavepoint(request, &finish) else { return .lost }
                    if conflicted { return rolledBack() }
                }
            }
        }
        if hadReads && takeLoseNextCommit() {
            try? connection.execute("ROLLBACK")
            return .lost
        }
        var commitError: (any Error)?
        do {
            try connection.execute("COMMIT")
            commitCount.withLock { $0 += 1 }
        } catch {
            if connection.isLost { return .lost }
            if connection.isConflict(error) { return rolledBack() }
            commitError = DurableError.storage(message: "\(place): a commit failed: \(error)")
            try? connection.execute("ROLLBACK")
        }
        for call in finish { call(commitError) }
        return .done
    }

    /// Begins the transaction of `writes`; nil once begun, otherwise how the batch ended (the connection
    /// lost, or every request failed with the reason).
    private func begin(_ writes: [Request]) -> Outcome? {
        do {
            try connection.execute(begin)
            return nil
        } catch {
            if connection.isLost { return .lost }
            let failure = DurableError.storage(message: "\(place): could not begin a transaction: \(error)")
            for request in writes { request.abandon(failure) }
            return .done
        }
    }

    private func takeLoseNextCommit() -> Bool {
        condition.lock()
        defer {
            if loseNextCommit { lost += 1 }
            loseNextCommit = false
            condition.unlock()
        }
        return loseNextCommit
    }

    /// Rolls the batch's transaction back after a lost conflict.
    private func rolledBack() -> Outcome {
        conflicted = false
        try? connection.execute("ROLLBACK")
        return .conflict
    }

    /// Runs `request` inside a savepoint of the batch's transaction (its failure undoes what it wrote, and
    /// only that); false when the connection was lost.
    private func runInSavepoint(
        _ request: Request, _ finish: inout [(_ commitError: (any Error)?) -> Void]
    ) -> Bool {
        do { try connection.execute("SAVEPOINT request") } catch {
            if connection.isLost { return false }
            let failure = DurableError.storage(message: "\(place): \(error)")
            finish.append { _ in request.abandon(failure) }
            return true
        }
        let (threw, completion) = request.perform(connection)
        if connection.isLost { return false }
        if threw { try? connection.execute("ROLLBACK TO request") }
        try? connection.execute("RELEASE request")
        finish.append(completion)
        return true
    }
}
