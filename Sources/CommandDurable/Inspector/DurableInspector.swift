import CommandCore
import Foundation

/// The runs of a store in a browser: a page of runs (counts by state, filters, live updates), a page per
/// run (its graph drawn as SVG with the critical path marked, a timeline of its steps, each step's
/// state, attempts, owner and error), cancel and retry buttons. Everything is written into the library:
/// no file or script from elsewhere (the pages work without a network).
///
/// ```swift
/// let inspector = DurableInspector(store: store)
/// let server = try inspector.serve(port: 8080)       // http://127.0.0.1:8080
/// ```
///
/// Or in an app's own server: answer its routes with ``response(to:)`` and stream ``events(run:)`` as
/// `text/event-stream` at `/api/changes`.
///
/// **Routes.** `GET /` the runs page; `GET /run?id=ID` a run's page (`&fragment=1`: its content only);
/// `GET /api/runs?state=S&workflow=W&tag=T&limit=N` the runs and the counts by state as JSON;
/// `GET /api/run?id=ID` a run as JSON; `GET /api/changes[?run=ID]` the changes as server-sent events;
/// `POST /api/cancel?id=ID` and `POST /api/retry?id=ID`.
///
/// **Safety.** Every id, error and value shown is escaped (a step whose error is `<script>…</script>`
/// shows that text), and the pages' own script runs under a content security policy with a nonce per
/// page, so an injected script would not run even if an escape were missed. A change (cancel, retry)
/// must carry the header `X-Durable-Token` (which a page of another site cannot send without a CORS
/// preflight that is never allowed), holding the token when one is set. ``serve(host:port:)`` refuses to
/// listen beyond loopback without a token.
///
/// **Threads.** ``response(to:)`` is `async` and never blocks; the built-in server
/// (``DurableInspector/Server``) blocks only threads of its own (one accepting, one per open
/// connection).
public final class DurableInspector: Sendable {
    public let store: DurableStore
    /// The token a change must carry (nil: any request from this machine's pages may change).
    public let token: String?

    public init(store: DurableStore, token: String? = nil) {
        self.store = store
        self.token = token.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// An HTTP request as the inspector reads it.
    public struct Request: Sendable {
        public var method: String
        /// The path and query (`/run?id=a%2Fb`).
        public var target: String
        /// Header names in lower case.
        public var headers: [String: String]
        public var body: Data

        public init(method: String, target: String, headers: [String: String] = [:], body: Data = Data()) {
            self.method = method.uppercased()
            self.target = target
            self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }) { $1 }
            self.body = body
        }

        var path: String { String(target.split(separator: "?", maxSplits: 1).first ?? "") }

        /// The query's parameters, decoded (`+` as a space).
        var query: [String: [String]] {
            guard let mark = target.firstIndex(of: "?") else { return [:] }
            var query: [String: [String]] = [:]
            for pair in target[target.index(after: mark)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map {
                    String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
                }
                guard let name = parts.first, !name.isEmpty else { continue }
                query[name, default: []].append(parts.count > 1 ? parts[1] : "")
            }
            return query
        }

        func value(_ name: String) -> String? { query[name]?.last.flatMap { $0.isEmpty ? nil : $0 } }
    }

    /// An HTTP response: status, headers, body.
    public struct Response: Sendable {
        public var status: Int
        public var headers: [(name: String, value: String)]
        public var body: Data

        init(status: Int, type: String, body: String, nonce: String? = nil) {
            self.status = status
            self.body = Data(body.utf8)
            var policy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'"
            if let nonce { policy += "; script-src 'nonce-\(nonce)'" }
            headers = [
                ("Content-Type", type), ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
                ("Content-Security-Policy", policy), ("Referrer-Policy", "no-referrer"),
                ("X-Frame-Options", "DENY"),
            ]
        }

        static func json(_ status: Int, _ object: Any) -> Response {
            let data =
                (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
            return Response(status: status, type: "application/json", body: String(decoding: data, as: UTF8.self))
        }

        static func problem(_ status: Int, _ message: String) -> Response { json(status, ["error": message]) }
    }

    /// Answers one request (every route but `/api/changes`, whose events ``events(run:)`` gives).
    public func response(to request: Request) async -> Response {
        do {
            switch (request.method, request.path) {
            case ("GET", "/"), ("HEAD", "/"):
                let nonce = Self.nonce()
                return Response(
                    status: 200, type: "text/html; charset=utf-8",
                    body: InspectorPages.runs(nonce: nonce, needsToken: token != nil), nonce: nonce)
            case ("GET", "/run"), ("HEAD", "/run"):
                guard let id = request.value("id") else { return .problem(400, "give the run's id: /run?id=ID") }
                guard let record = try await store.runs(.run(id)).first else {
                    return Response(
                        status: 404, type: "text/html; charset=utf-8",
                        body:
                            "<!doctype html><title>No run</title><p>No run <code>\(Html.escape(id))</code> in the store. "
                            + "<a href=\"/\">All runs</a>")
                }
                let content = InspectorPages.runContent(record, now: Date())
                if request.value("fragment") != nil {
                    return Response(status: 200, type: "text/html; charset=utf-8", body: content)
                }
                let nonce = Self.nonce()
                return Response(
                    status: 200, type: "text/html; charset=utf-8",
                    body: InspectorPages.run(record, content: content, nonce: nonce, needsToken: token != nil),
                    nonce: nonce)
            case ("GET", "/api/runs"):
                return try await runs(request)
            case ("GET", "/api/run"):
                guard let id = request.value("id") else { return .problem(400, "give the run's id: ?id=ID") }
                guard let record = try await store.runs(.run(id)).first else {
                    return .problem(404, "no run '\(id)' in the store")
                }
                return .json(200, InspectorPages.object(record, steps: true))
            case ("POST", "/api/cancel"), ("POST", "/api/retry"):
                if let refusal = refusal(request) { return refusal }
                guard let id = request.value("id") else { return .problem(400, "give the run's id: ?id=ID") }
                if request.path == "/api/cancel" {
                    try await store.cancel(runID: id)
                } else {
                    try await store.retry(runID: id)
                }
                return .json(200, ["run": id, "done": String(request.path.dropFirst(5))])
            case (_, "/"), (_, "/run"), (_, "/api/runs"), (_, "/api/run"), (_, "/api/cancel"), (_, "/api/retry"):
                return .problem(405, "\(request.method) is not allowed on \(request.path)")
            default:
                return .problem(404, "no page \(request.path)")
            }
        } catch let error as DurableError {
            switch error {
            case .unknownRun: return .problem(404, "\(error)")
            case .notRetryable: return .problem(409, "\(error)")
            default: return .problem(500, "\(error)")
            }
        } catch {
            return .problem(500, "\(error)")
        }
    }

    /// The changes (of run `run`, or all), each a server-sent event (`data: <DurableChange as JSON>`), and
    /// a comment every 15 s while nothing changes (so a closed page is noticed). Ends when the consumer
    /// stops iterating or the store closes.
    public func events(run: String? = nil) -> AsyncStream<String> {
        let changes = store.changes()
        return AsyncStream(String.self, bufferingPolicy: .bufferingNewest(1_000)) { continuation in
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let reading = Task {
                for await change in changes where run == nil || change.run == run {
                    let json = (try? encoder.encode(change)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
                    continuation.yield("data: \(json)\n\n")
                }
                continuation.finish()
            }
            let pinging = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 15_000_000_000)
                    continuation.yield(": ping\n\n")
                }
            }
            continuation.onTermination = { _ in
                reading.cancel()
                pinging.cancel()
            }
        }
    }

    /// Why a change request is refused, or nil: it must carry `X-Durable-Token`, equal to the token when
    /// one is set.
    private func refusal(_ request: Request) -> Response? {
        guard let given = request.headers["x-durable-token"] else {
            return .problem(403, "a change needs the header X-Durable-Token (empty when the inspector has no token)")
        }
        guard let token else { return nil }
        // Compared in time independent of where they differ.
        let (a, b) = (Array(given.utf8), Array(token.utf8))
        var difference = a.count ^ b.count
        for index in 0..<min(a.count, b.count) { difference |= Int(a[index] ^ b[index]) }
        return difference == 0 ? nil : .problem(401, "wrong or missing token: give the inspector's token")
    }

    private func runs(_ request: Request) async throws -> Response {
        var filter = DurableRunFilter()
        if let states = request.query["state"]?.filter({ !$0.isEmpty }), !states.isEmpty {
            var set = Set<DurableRunState>()
            for name in states {
                guard let state = DurableRunState(rawValue: name) else {
                    return .problem(400, "'\(name)' is not a state: pending, running, completed, failed, cancelled")
                }
                set.insert(state)
            }
            filter.states = set
        }
        filter.workflow = request.value("workflow")
        if let tags = request.query["tag"]?.filter({ !$0.isEmpty }), !tags.isEmpty { filter.tags = Set(tags) }
        let limit = request.value("limit").flatMap(Int.init) ?? 200
        filter.limit = max(1, min(limit, 1_000))
        filter.after = request.value("after")
        let records = try await store.runs(filter)
        let counts = try await store.runCounts(filter)
        return .json(
            200,
            [
                "runs": records.map { InspectorPages.object($0, steps: false) },
                "counts": Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, $0.value) }),
            ])
    }

    static func nonce() -> String { UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased() }

    /// Serves the inspector on `host:port` (port 0: one the system picks; ``Server/port`` tells) until
    /// ``Server/stop()``. Binds 127.0.0.1 by default; another host needs a token.
    ///
    /// - Throws: ``DurableError/storage(message:)`` when the port cannot be bound, or `host` is beyond
    ///   loopback and the inspector has no token.
    public func serve(host: String = "127.0.0.1", port: Int = 8080) throws -> Server {
        guard Sockets.isLoopback(host) || token != nil else {
            throw DurableError.storage(
                message: "the inspector listens beyond loopback (\(host)) only with a token: "
                    + "DurableInspector(store:token:), or durable serve --token T")
        }
        do {
            let (socket, bound) = try Sockets.listen(host: host, port: port)
            return Server(inspector: self, socket: socket, host: host, port: bound)
        } catch let failure as Sockets.Failure {
            throw DurableError.storage(message: "the inspector: \(failure.description)")
        }
    }
}
