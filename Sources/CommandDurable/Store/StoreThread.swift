import CommandCore
import Dispatch
import Foundation

/// The store's own thread: every database call of a store runs here, never on a command's queue, the
/// Dispatch pool or the concurrency pool (a `FULL` commit waits for the disk; a server's answer waits for
/// the network).
///
/// Group commit: the thread takes every request waiting and writes them in one `BEGIN IMMEDIATE ...
/// COMMIT` (each inside a savepoint, so one request's failure undoes that request only); while one commit
/// waits for the disk, the next batch gathers. Completions are called after the commit: an engine
/// callback on a global Dispatch queue (never on this thread, so no command code runs here), a
/// synchronous caller's wake-up right here. A periodic job (lease renewal) runs between batches.
package final class StoreThread: @unchecked Sendable {
    // `@unchecked Sendable`: `pending`, `stopping` and `periodic` are guarded by `condition`; the
    // connection is made and touched only by the thread.
    private struct Request {
        let write: Bool
        /// A synchronous caller's: abandoned when the connection is not back by then.
        let deadline: Date?
        /// Runs the request on the connection; returns whether it threw, and what to call once its batch
        /// ended (with the commit's failure, which replaces the request's own result).
        let perform: (any SQLDatabase) -> (threw: Bool, finish: (_ commitError: (any Error)?) -> Void)
        /// Fails the request without running it.
        let abandon: (any Error) -> Void
    }

    private let condition = NSCondition()
    private var pending: [Request] = []
    private var stopping = false
    private var thread: Thread?
    /// Signalled once the loop ended and the connection is closed.
    private let finished = DispatchSemaphore(value: 0)
    private var periodic: (every: TimeInterval, next: Date, job: (any SQLDatabase) -> Void)?
    /// Opened on the thread, then only touched there.
    private var connection: (any SQLDatabase)!
    private let open: @Sendable () throws -> any SQLDatabase
    private let begin: String
    private let patience: TimeInterval
    /// Set (on the thread) by a request whose statement lost a conflict with another transaction.
    private var conflicted = false
    /// Commits made (for the group-commit figures).
    private let commitCount = Locked(0)

    /// Starts the thread, which opens the connection with `open` (every database call of a store runs on
    /// its thread, opening included); throws what `open` threw (the thread then ends). `begin` begins a
    /// write transaction; `patience` bounds a synchronous caller's wait for a lost connection.
    init(
        name: String, begin: String, patience: TimeInterval = 10,
        open: @escaping @Sendable () throws -> any SQLDatabase
    ) throws {
        self.open = open
        self.begin = begin
        self.patience = patience
        let opened = ResultBox<Void>()
        let thread = Thread { [self] in
            Thread.current.threadDictionary[StoreThread.marker] = true
            do {
                connection = try open()
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

    /// Debug builds: the database is called only on a thread of its own (a store's thread, or a
    /// measurement's), never on a command's queue, the Dispatch pool or the concurrency pool.
    @inline(__always)
    package static func checkThread() {
        assert(
            Thread.current.threadDictionary[marker] != nil,
            "a store's database called outside a store's own thread (\(Thread.current))")
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

    /// Runs `body` on the thread, inside a write transaction (with others: group commit) when `write`;
    /// `completion` gets its result once the transaction committed, on a global queue (`hop`) or on the
    /// thread itself (a synchronous caller waking up).
    func submit<T>(
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
        let request = Request(
            write: write, deadline: hop ? nil : Date().addingTimeInterval(patience),
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
        condition.lock()
        let accepted = !stopping
        if accepted {
            pending.append(request)
            condition.signal()
        }
        condition.unlock()
        if !accepted {
            completion(.failure(DurableError.storage(message: "the store was closed")))
        }
    }

    /// Runs `body` on the thread and waits for it (the caller's thread sleeps; the store's thread does
    /// the I/O).
    func sync<T>(write: Bool, _ body: @escaping (any SQLDatabase) throws -> T) throws -> T {
        let box = ResultBox<T>()
        submit(write: write, hop: false, body) { result in box.put(result) }
        return try box.take().get()
    }

    /// Runs `job` on the thread every `interval` seconds, between batches, in its own transaction.
    func every(_ interval: TimeInterval, _ job: @escaping (any SQLDatabase) -> Void) {
        condition.lock()
        periodic = (interval, Date().addingTimeInterval(interval), job)
        condition.signal()
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
            while pending.isEmpty && !stopping {
                if let periodic {
                    if periodic.next <= Date() || !condition.wait(until: periodic.next) { break }
                } else {
                    condition.wait()
                }
            }
            let batch = pending
            pending = []
            let done = stopping && batch.isEmpty
            var job: ((any SQLDatabase) -> Void)?
            if let current = periodic, current.next <= Date() {
                job = current.job
                periodic = (current.every, Date().addingTimeInterval(current.every), current.job)
            }
            condition.unlock()
            if let job {
                run([
                    Request(
                        write: true, deadline: nil,
                        perform: { connection in
                            job(connection)
                            return (false, { _ in })
                        }, abandon: { _ in })
                ])
            }
            if !batch.isEmpty { run(batch) }
            if done { break }
        }
        connection.close()
        finished.signal()
    }

    /// One batch, run again on a new connection each time the connection is lost under it.
    private func run(_ batch: [Request]) {
        var batch = batch
        var delay: TimeInterval = 0.05
        while true {
            let outcome = attempt(batch)
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
                    CommandLogging.log(.info, command: thread?.name ?? "store", "connection opened again")
                    break
                } catch {
                    reason = String(describing: error)
                }
                // Synchronous callers past their patience, and everything once the store closes, fail now.
                let now = Date()
                condition.lock()
                let closing = stopping
                let expired = pending.filter { closing || ($0.deadline.map { $0 <= now } ?? false) }
                pending.removeAll { closing || ($0.deadline.map { $0 <= now } ?? false) }
                condition.unlock()
                let failure = DurableError.storage(
                    message: "lost the connection and could not open it again: \(reason)")
                for request in expired { request.abandon(failure) }
                for request in batch where closing || (request.deadline.map { $0 <= now } ?? false) {
                    request.abandon(failure)
                }
                batch.removeAll { closing || ($0.deadline.map { $0 <= now } ?? false) }
                if batch.isEmpty && closing { return }
                Thread.sleep(forTimeInterval: delay)  // the store's own thread: nothing else waits on it
                delay = min(delay * 2, 2)
            }
        }
    }

    private enum Outcome { case done, lost, conflict }

    /// One batch: the reads first, each on its own; the writes together in one transaction. Nothing is
    /// finished when the connection was lost under it, or when a request lost a conflict (the
    /// transaction is rolled back): the batch runs again.
    private func attempt(_ batch: [Request]) -> Outcome {
        var finish: [(_ commitError: (any Error)?) -> Void] = []
        var reads: [(_ commitError: (any Error)?) -> Void] = []
        let writes = batch.filter(\.write)
        for request in batch where !request.write {
            reads.append(request.perform(connection).finish)
            if connection.isLost { return .lost }
            if conflicted { return rolledBack() }
        }
        for call in reads { call(nil) }
        guard !writes.isEmpty else { return .done }
        do {
            try connection.execute(begin)
        } catch {
            if connection.isLost { return .lost }
            let failure = DurableError.storage(message: "could not begin a transaction: \(error)")
            for request in writes { request.abandon(failure) }
            return .done
        }
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
            for request in writes {
                guard runInSavepoint(request, &finish) else { return .lost }
                if conflicted { return rolledBack() }
            }
        }
        var commitError: (any Error)?
        do {
            try connection.execute("COMMIT")
            commitCount.withLock { $0 += 1 }
        } catch {
            if connection.isLost { return .lost }
            if connection.isConflict(error) { return rolledBack() }
            commitError = DurableError.storage(message: "a commit failed: \(error)")
            try? connection.execute("ROLLBACK")
        }
        for call in finish { call(commitError) }
        return .done
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
            let failure = DurableError.storage(message: "\(error)")
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
