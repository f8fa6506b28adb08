import CommandCore
import Dispatch
import Foundation

extension DurableInspector {
    /// The inspector's own HTTP/1.1 server (``DurableInspector/serve(host:port:)``): one thread accepts,
    /// each connection has a thread of its own (an inspector has a handful of pages open; at most 64
    /// connections, more are answered 503), one request per connection (`Connection: close`), the
    /// server-sent events' connection open until the page closes. Requests are answered by
    /// ``DurableInspector/response(to:)`` on the concurrency pool, the connection's thread waiting for it.
    /// ``stop()`` closes the listening socket; open connections end with their request.
    public final class Server: Sendable {
        public let host: String
        /// The port bound (the one the system picked, for port 0).
        public let port: Int
        private let inspector: DurableInspector
        private let socket: Int32
        // Guards whether the server stopped and how many connections are open.
        private let state = Locked<(stopped: Bool, open: Int)>((false, 0))

        init(inspector: DurableInspector, socket: Int32, host: String, port: Int) {
            self.inspector = inspector
            self.socket = socket
            self.host = host
            self.port = port
            let accepting = Thread { [self] in acceptLoop() }
            accepting.name = "AwesomeCommand inspector"
            accepting.start()
        }

        /// The address pages are served at.
        public var url: URL { URL(string: "http://\(host == "0.0.0.0" ? "127.0.0.1" : host):\(port)/")! }

        /// Stops accepting connections.
        public func stop() {
            let first = state.withLock { state -> Bool in
                defer { state.stopped = true }
                return !state.stopped
            }
            if first { Sockets.shut(socket) }
        }

        deinit { stop() }

        private func acceptLoop() {
            while let connection = Sockets.accept(socket) {
                let admitted = state.withLock { state -> Bool in
                    guard !state.stopped, state.open < 64 else { return false }
                    state.open += 1
                    return true
                }
                guard admitted else {
                    _ = Sockets.write(connection, Self.head(503, [("Content-Length", "0")]))
                    Sockets.shut(connection)
                    if state.withLock({ $0.stopped }) { return }
                    continue
                }
                let thread = Thread { [self] in
                    serve(connection)
                    Sockets.shut(connection)
                    state.withLock { $0.open -= 1 }
                }
                thread.name = "AwesomeCommand inspector connection"
                thread.start()
            }
        }

        /// One request on `connection` (this connection's thread).
        private func serve(_ connection: Int32) {
            guard let request = Self.readRequest(connection) else {
                _ = Sockets.write(connection, Self.head(400, [("Content-Length", "0")]))
                return
            }
            if request.method == "GET" && request.path == "/api/changes" {
                return streamEvents(connection, run: request.value("run"))
            }
            let answered = DispatchSemaphore(value: 0)
            let answer = Locked<Response?>(nil)
            let inspector = inspector
            Task {
                let response = await inspector.response(to: request)
                answer.withLock { $0 = response }
                answered.signal()
            }
            // This connection's own thread waits (never a pool's).
            answered.wait()
            guard let response = answer.withLock({ $0 }) else { return }
            var headers = response.headers
            headers.append(("Content-Length", "\(response.body.count)"))
            var bytes = Self.head(response.status, headers)
            if request.method != "HEAD" { bytes += [UInt8](response.body) }
            _ = Sockets.write(connection, bytes)
        }

        /// The changes as server-sent events, until the page goes (a write fails) or the store closes.
        private func streamEvents(_ connection: Int32, run: String?) {
            let pending = Locked<(events: [String], ended: Bool)>(([], false))
            let ready = DispatchSemaphore(value: 0)
            let events = inspector.events(run: run)
            let reading = Task {
                for await event in events {
                    pending.withLock { $0.events.append(event) }
                    ready.signal()
                }
                pending.withLock { $0.ended = true }
                ready.signal()
            }
            defer { reading.cancel() }
            let head = Self.head(
                200,
                [
                    ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"),
                    ("X-Content-Type-Options", "nosniff"),
                ])
            guard Sockets.write(connection, head + Array("retry: 1000\n\n".utf8)) else { return }
            while true {
                ready.wait()
                let (batch, ended) = pending.withLock { state -> ([String], Bool) in
                    defer { state.events = [] }
                    return (state.events, state.ended)
                }
                if !batch.isEmpty, !Sockets.write(connection, Array(batch.joined().utf8)) { return }
                if ended || state.withLock({ $0.stopped }) { return }
            }
        }

        static func head(_ status: Int, _ headers: [(name: String, value: String)]) -> [UInt8] {
            let reasons = [
                200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                405: "Method Not Allowed", 409: "Conflict", 413: "Content Too Large", 500: "Internal Server Error",
                503: "Service Unavailable",
            ]
            var text = "HTTP/1.1 \(status) \(reasons[status] ?? "Status")\r\nConnection: close\r\n"
            for header in headers { text += "\(header.name): \(header.value)\r\n" }
            return Array((text + "\r\n").utf8)
        }

        /// A request's line, headers and body (at most 64 KiB of headers, 1 MiB of body).
        static func readRequest(_ connection: Int32) -> Request? {
            var bytes: [UInt8] = []
            let separator: [UInt8] = [13, 10, 13, 10]
            var headerEnd: Int?
            while headerEnd == nil {
                guard let chunk = Sockets.read(connection), !chunk.isEmpty else { return nil }
                let searchFrom = max(0, bytes.count - 3)
                bytes += chunk
                headerEnd = Self.find(separator, in: bytes, from: searchFrom)
                if headerEnd == nil && bytes.count > 65_536 { return nil }
            }
            guard let end = headerEnd else { return nil }
            let head = String(decoding: bytes[..<end], as: UTF8.self)
            var lines = head.components(separatedBy: "\r\n")
            let requestLine = lines.removeFirst().split(separator: " ")
            guard requestLine.count == 3 else { return nil }
            var headers: [String: String] = [:]
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                    in: .whitespaces)
            }
            var body = Array(bytes[(end + 4)...])
            let length = min(Int(headers["content-length"] ?? "0") ?? 0, 1_048_576)
            while body.count < length {
                guard let chunk = Sockets.read(connection), !chunk.isEmpty else { return nil }
                body += chunk
            }
            return Request(
                method: String(requestLine[0]), target: String(requestLine[1]), headers: headers,
                body: Data(body.prefix(length)))
        }

        private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
            guard bytes.count >= needle.count else { return nil }
            var index = start
            while index + needle.count <= bytes.count {
                if bytes[index..<index + needle.count].elementsEqual(needle) { return index }
                index += 1
            }
            return nil
        }
    }
}
