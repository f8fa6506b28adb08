import Dispatch
import Foundation

/// A small HTTP/1.1 server on 127.0.0.1, on a port the system picks, for tests: it answers each request
/// with what your handler returns, and nothing reaches beyond the loopback interface.
///
/// ```swift
/// let server = try LoopbackHTTPServer { request in
///     request.path == "/user" ? .response(status: 200, body: Data(#"{"name":"Ada"}"#.utf8)) : .response(status: 404)
/// }
/// defer { server.stop() }
/// let user = try await RequestCommand(url: server.url("/user")).decoding(User.self).value
/// ```
///
/// **Threads.** One thread accepts connections and one thread serves each connection (blocking socket
/// calls, on threads of its own: never the Dispatch or Swift concurrency pools). The handler is
/// called on the connection's thread, possibly on several at once. Connections are kept alive
/// (HTTP/1.1) until the client closes them; request bodies need a `Content-Length` (URLSession sends
/// one), and `Expect: 100-continue` is answered.
///
/// **Stop.** Call ``stop()`` when done (its threads hold the server until then): it closes the
/// listening socket and shuts every open connection down; a request under way, or a stalled reply,
/// ends with a closed connection.
public final class LoopbackHTTPServer: @unchecked Sendable {
    // `@unchecked Sendable`: `state` is guarded by its lock; `port` and `handler` are immutable; the
    // listening descriptor is written once in `init`.

    /// A request as the server read it.
    public struct Request: Sendable {
        /// `GET`, `POST`...
        public let method: String
        /// The path and query, as sent (`/files/a?x=1`).
        public let path: String
        /// The header fields, names lowercased.
        public let headers: [String: String]
        /// The body (empty without a `Content-Length`).
        public let body: Data
        /// When the request was read, in nanoseconds of `DispatchTime` (monotonic).
        public let receivedAt: UInt64
    }

    /// How to answer a request.
    public enum Reply: Sendable {
        /// A whole response; `Content-Length` is added.
        case response(status: Int, headers: [String: String] = [:], body: Data = Data())
        /// The status line and headers declaring `declaredLength` bytes, then `firstBytes` of the body,
        /// then nothing more until the client closes the connection or the server stops: a server
        /// still answering.
        case stall(status: Int = 200, declaredLength: Int, firstBytes: Data)
        /// The headers declaring `declaredLength` bytes, then `partialBody`, then the connection is
        /// closed: a connection lost mid-body.
        case closeMidBody(status: Int = 200, declaredLength: Int, partialBody: Data)
    }

    /// What went wrong starting the server: the failing call and its `errno`.
    public struct StartError: Error, CustomStringConvertible {
        public let call: String
        public let code: Int32
        public var description: String {
            "LoopbackHTTPServer: \(call) failed (errno \(code): \(Sockets.describe(code)))"
        }
    }

    private struct State {
        var stopped = false
        var connections: Set<Int32> = []
        var requests: [Request] = []
    }

    /// The port on 127.0.0.1.
    public let port: Int
    private let listener: Int32
    private let handler: @Sendable (Request) -> Reply
    // Guards the stop flag, the open connections and the requests seen.
    private let state = NSLock()
    private var stateValue = State()

    /// Starts listening on 127.0.0.1 (a port the system picks) and serving with `handler`.
    public init(_ handler: @escaping @Sendable (Request) -> Reply) throws {
        self.handler = handler
        (listener, port) = try Sockets.bindToLoopback(listening: true)
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "LoopbackHTTPServer accept \(port)"
        thread.start()
    }

    /// A port on 127.0.0.1 that refuses connections while the reservation lives (a socket bound to it,
    /// not listening): "a port nobody listens on", without guessing one.
    public final class UnusedPort: Sendable {
        public let port: Int
        private let descriptor: Int32

        public init() throws {
            (descriptor, port) = try Sockets.bindToLoopback(listening: false)
        }

        /// `http://127.0.0.1:<port><path>`.
        public func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

        deinit { Sockets.close(descriptor) }
    }

    /// `http://127.0.0.1:<port><path>`.
    public func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)\(path.hasPrefix("/") ? path : "/" + path)")!
    }

    /// The requests read so far, in order.
    public var requests: [Request] { locked { $0.requests } }

    /// Stops accepting and shuts every open connection down. Idempotent.
    public func stop() {
        let connections = locked { state -> Set<Int32>? in
            if state.stopped { return nil }
            state.stopped = true
            return state.connections
        }
        guard let connections else { return }
        Sockets.shutdown(listener)
        for connection in connections { Sockets.shutdown(connection) }
    }

    private func locked<T>(_ body: (inout State) -> T) -> T {
        state.lock()
        defer { state.unlock() }
        return body(&stateValue)
    }

    private func acceptLoop() {
        while true {
            guard let connection = Sockets.accept(listener) else {
                if Sockets.interrupted && !locked({ $0.stopped }) { continue }
                break
            }
            let admitted = locked { state -> Bool in
                if state.stopped { return false }
                state.connections.insert(connection)
                return true
            }
            guard admitted else {
                Sockets.close(connection)
                break
            }
            let thread = Thread { [self] in
                serve(connection)
                _ = locked { $0.connections.remove(connection) }
                Sockets.close(connection)
            }
            thread.name = "LoopbackHTTPServer connection"
            thread.start()
        }
        Sockets.close(listener)
    }

    /// Serves requests on `connection` until the client closes it (or sends `Connection: close`).
    private func serve(_ connection: Int32) {
        var buffer = Data()
        while true {
            guard let request = read(from: connection, buffer: &buffer) else { return }
            locked { $0.requests.append(request) }
            let reply = handler(request)
            switch reply {
            case .response(let status, let headers, let body):
                guard Sockets.send(head(status, headers, length: body.count) + body, to: connection) else { return }
            case .stall(let status, let declaredLength, let firstBytes):
                guard Sockets.send(head(status, [:], length: declaredLength) + firstBytes, to: connection) else {
                    return
                }
                Sockets.waitUntilClosed(connection)
                return
            case .closeMidBody(let status, let declaredLength, let partialBody):
                _ = Sockets.send(head(status, [:], length: declaredLength) + partialBody, to: connection)
                return
            }
            if request.headers["connection"]?.lowercased() == "close" { return }
        }
    }

    private func head(_ status: Int, _ headers: [String: String], length: Int) -> Data {
        var text = "HTTP/1.1 \(status) \(HTTPURLResponseReason.phrase(status))\r\nContent-Length: \(length)\r\n"
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
        return Data((text + "\r\n").utf8)
    }

    /// Reads one request (head and `Content-Length` body), answering `Expect: 100-continue`. Nil when
    /// the connection closed (or the head is not HTTP).
    private func read(from connection: Int32, buffer: inout Data) -> Request? {
        let separator = Data("\r\n\r\n".utf8)
        var headEnd = buffer.range(of: separator)
        while headEnd == nil {
            guard Sockets.receive(from: connection, into: &buffer) else { return nil }
            headEnd = buffer.range(of: separator)
        }
        guard let headEnd, let head = String(data: buffer[buffer.startIndex..<headEnd.lowerBound], encoding: .utf8)
        else { return nil }
        buffer.removeSubrange(buffer.startIndex..<headEnd.upperBound)
        let lines = head.components(separatedBy: "\r\n")
        let parts = lines[0].split(separator: " ")
        guard parts.count >= 2 else { return nil }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "") ?? 0
        if headers["expect"]?.lowercased() == "100-continue" {
            guard Sockets.send(Data("HTTP/1.1 100 Continue\r\n\r\n".utf8), to: connection) else { return nil }
        }
        while buffer.count < length {
            guard Sockets.receive(from: connection, into: &buffer) else { return nil }
        }
        let body = Data(buffer.prefix(length))
        buffer.removeSubrange(buffer.startIndex..<buffer.startIndex + length)
        return Request(
            method: String(parts[0]), path: String(parts[1]), headers: headers, body: body,
            receivedAt: DispatchTime.now().uptimeNanoseconds)
    }
}

/// Reason phrases for the statuses a test uses (any other: "Status").
enum HTTPURLResponseReason {
    static func phrase(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 408: return "Request Timeout"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "Status"
        }
    }
}
