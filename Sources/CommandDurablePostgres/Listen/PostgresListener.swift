import CommandDurable
import Foundation

/// A store's listening connection: `LISTEN awesomecommand` on a thread of its own, each notification
/// of another store posted to the store's feed (on a global queue: workers and enqueued runs look at the
/// store at once); the store's own are skipped, since it posts its changes itself after each commit.
///
/// A lost connection is opened again with a backoff (50 ms to 2 s); once it is back, a `.ready` is posted,
/// since notifications sent meanwhile are gone. ``stop()`` wakes the thread through a pipe and waits for
/// it to close the connection.
final class PostgresListener: @unchecked Sendable {
    // `@unchecked Sendable`: the connection is made and touched only by the thread; the pipe's ends are
    // immutable after init; `stopped` is a `Locked`.
    static let channel = "awesomecommand"

    private let conninfo: String
    private let feed: ChangeFeed
    /// The store's owner id: its own notifications are skipped (it told its process already).
    private let origin: String
    private let wake: (read: Int32, write: Int32)
    private let stopped = Locked(false)
    private let finished = DispatchSemaphore(value: 0)

    /// Connects and listens before returning (so nothing committed after it is missed); throws what
    /// connecting threw.
    init(conninfo: String, feed: ChangeFeed, origin: String) throws {
        self.conninfo = conninfo
        self.feed = feed
        self.origin = origin
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            throw DurableError.storage(message: "could not make a pipe for the listener (errno \(errno))")
        }
        wake = (ends[0], ends[1])
        let opened = ResultBox<Void>()
        let thread = Thread { [self] in
            Thread.current.threadDictionary[StoreThread.marker] = true
            var connection: PostgresConnection?
            do {
                connection = try listen()
                opened.put(.success(()))
            } catch {
                opened.put(.failure(error))
            }
            if connection != nil { loop(connection) }
            connection?.close()
            close(wake.read)
            close(wake.write)
            finished.signal()
        }
        thread.name = "AwesomeCommand durable listener"
        thread.start()
        try opened.take().get()
    }

    /// Stops the thread and waits until its connection is closed.
    func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
        finished.wait()
    }

    private var isStopped: Bool { stopped.withLock { $0 } }

    private func listen() throws -> PostgresConnection {
        let connection = try PostgresConnection(conninfo)
        try connection.execute("LISTEN \(Self.channel)")
        return connection
    }

    private func loop(_ first: PostgresConnection?) {
        var connection = first
        var delay: TimeInterval = 0.05
        while !isStopped {
            guard let current = connection else {
                // Lost: wait out the backoff (or a stop), then open again.
                if waitForWake(timeout: delay) { break }
                delay = min(delay * 2, 2)
                connection = try? listen()
                if connection != nil {
                    delay = 0.05
                    feed.post(.ready)
                }
                continue
            }
            var fds = [
                pollfd(fd: current.socket, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&fds, 2, -1)
            if ready < 0 { continue }  // interrupted
            if fds[1].revents != 0 { break }
            do {
                for payload in try current.notifications() {
                    if let change = StoreChange(notification: payload, ignoring: origin) {
                        feed.post(change, heard: true)
                    }
                }
            } catch {
                current.close()
                connection = nil
            }
        }
        connection?.close()
    }

    /// Waits up to `timeout` for the stop's byte; true when it came.
    private func waitForWake(timeout: TimeInterval) -> Bool {
        var fds = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
        return poll(&fds, 1, Int32(timeout * 1000)) > 0
    }
}
