import CommandGraph
import CommandNetwork
import CommandNetworkTesting
import CommandTestSupport
import Dispatch
import Foundation
import Testing

private struct User: Codable, Sendable, Equatable {
    let id: Int
    let name: String
}

private let ada = Data(#"{"id":1,"name":"Ada"}"#.utf8)

/// A server for one test: `/user` answers JSON, `/missing` 404 with a body, `/broken` 500 with a
/// body, `/garbage` 200 with a body that is not JSON; anything else goes to `other`.
private func server(
    _ other: @escaping @Sendable (LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Reply = { _ in
        .response(status: 404)
    }
) throws -> LoopbackHTTPServer {
    try LoopbackHTTPServer { request in
        switch request.path {
        case "/user": return .response(status: 200, headers: ["Content-Type": "application/json"], body: ada)
        case "/missing": return .response(status: 404, body: Data("no such thing".utf8))
        case "/broken": return .response(status: 500, body: Data("it broke".utf8))
        case "/garbage": return .response(status: 200, body: Data("<html>".utf8))
        default: return other(request)
        }
    }
}

/// `bytes` bytes of a 251-byte pattern (a prime, so a shifted or repeated chunk does not match),
/// built by copying blocks, not byte by byte: this runs on the concurrency pool, under ThreadSanitizer
/// too, where a closure per byte held a pool thread for seconds.
private func pattern(bytes: Int) -> Data {
    let block = Data((0..<251).map { UInt8($0) })
    var data = Data(capacity: bytes)
    while data.count + block.count <= bytes { data.append(block) }
    data.append(block.prefix(bytes - data.count))
    return data
}

extension CommandState {
    fileprivate var error: (any Error)? {
        switch self {
        case .failed(let error): return error
        case .cancelled(let error): return error
        default: return nil
        }
    }
}

/// Network commands against a real HTTP/1.1 server on 127.0.0.1 (started and stopped by each test;
/// nothing reaches beyond loopback).
@Suite struct NetworkCommandTests {
    @Test func jsonGET_andDecode() async throws {
        let server = try server()
        defer { server.stop() }
        let response = try await RequestCommand(url: server.url("/user")).value
        #expect(response.status == 200)
        #expect(response.body == ada)
        #expect(response.value(forHTTPHeaderField: "content-type") == "application/json")
        #expect(response.value(forHTTPHeaderField: "CONTENT-TYPE") == "application/json")
        let user = try await RequestCommand(url: server.url("/user")).decoding(User.self).value
        #expect(user == User(id: 1, name: "Ada"))
        #expect(server.requests.map(\.method) == ["GET", "GET"])
    }

    @Test func aSessionOfYours_works_too() async throws {
        let server = try server()
        defer { server.stop() }
        let response = try await RequestCommand(request: URLRequest(url: server.url("/user")), session: .shared).value
        #expect(response.body == ada)
    }

    @Test func statusesOutside2xx_failWithHTTPError_carryingTheBody() async throws {
        let server = try server()
        defer { server.stop() }
        for (path, status, body) in [("/missing", 404, "no such thing"), ("/broken", 500, "it broke")] {
            let command = RequestCommand(url: server.url(path))
            let state = await terminalState(of: command, start: true)
            guard case .failed(let error) = state, let http = error as? HTTPError else {
                Issue.record("\(path): \(state)")
                continue
            }
            #expect(http.status == status)
            #expect(String(decoding: http.body, as: UTF8.self) == body)
            #expect(http.command == "GET \(server.url(path).absoluteString)")
            #expect(http.description.contains("HTTP \(status)"))
        }
    }

    @Test func aBodyThatDoesNotDecode_failsWithTheDecodingError() async {
        guard let server = try? server() else {
            Issue.record("the server did not start")
            return
        }
        defer { server.stop() }
        let state = await terminalState(
            of: RequestCommand(url: server.url("/garbage")).decoding(User.self), start: true)
        #expect(state.error is DecodingError, "\(state)")
    }

    @Test func cancel_whileTheServerIsStillAnswering_endsAtOnce_andDeliversNothing() async throws {
        let arrived = Checkpoint()
        let server = try server { _ in
            arrived.fulfill()
            return .stall(declaredLength: 1_000_000, firstBytes: Data(count: 1_000))
        }
        defer { server.stop() }
        let command = RequestCommand(url: server.url("/slow"))
        let events = Locked<[String]>([])
        let ended = Checkpoint()
        command.execute(on: .immediate) { event in
            events.withLock { $0.append(event.isTerminal ? "\(event)" : "value") }
            if event.isTerminal { ended.fulfill() }
        }
        #expect(await arrived.wait())
        command.cancel()
        // The command ended inside `cancel()`: no wait for URLSession or the server.
        guard case .cancelled = command.state else {
            Issue.record("\(command.state)")
            return
        }
        #expect(await ended.wait())
        #expect(events.withLock { $0 }.count == 1 && events.withLock { $0 }.first?.hasPrefix("cancelled") == true)
    }

    @Test func aPortNobodyListensOn_failsWithURLError() async throws {
        let nobody = try LoopbackHTTPServer.UnusedPort()
        let state = await terminalState(of: RequestCommand(url: nobody.url("/x")), start: true)
        let error = state.error as? URLError
        #expect(error?.code == .cannotConnectToHost, "\(state)")
    }

    @Test func aConnectionClosedMidBody_failsWithURLError() async throws {
        let server = try server { _ in .closeMidBody(declaredLength: 10_000, partialBody: Data(count: 100)) }
        defer { server.stop() }
        let state = await terminalState(of: RequestCommand(url: server.url("/cut")), start: true)
        #expect(state.error is URLError, "\(state)")
    }

    @Test func a503WithRetryAfter_isRetriedAfterTheWait() async throws {
        let count = Locked(0)
        let server = try server { _ in
            let attempt = count.withLock {
                $0 += 1
                return $0
            }
            return attempt == 1
                ? .response(status: 503, headers: ["Retry-After": "1"], body: Data("busy".utf8))
                : .response(status: 200, body: Data("ok".utf8))
        }
        defer { server.stop() }
        let url = server.url("/busy")
        let robust = Command<HTTPResponse>.retry(
            3, delay: .exponential(initial: .milliseconds(200), jitter: 0.2),
            shouldRetry: NetworkRetryPolicy.transientFailures
        ) { _ in RequestCommand(url: url) }
        let response = try await robust.value
        #expect(response.status == 200)
        let requests = server.requests
        #expect(requests.count == 2)
        if requests.count == 2 {
            #expect(requests[1].receivedAt - requests[0].receivedAt >= 1_000_000_000, "Retry-After: 1 was honoured")
        }
    }

    @Test func a404_isNotRetried() async throws {
        let server = try server()
        defer { server.stop() }
        let url = server.url("/missing")
        let robust = Command<HTTPResponse>.retry(3, shouldRetry: NetworkRetryPolicy.transientFailures) { _ in
            RequestCommand(url: url)
        }
        let state = await terminalState(of: robust, start: true)
        #expect((state.error as? HTTPError)?.status == 404)
        #expect(server.requests.count == 1)
    }

    @Test func aDownloadOf2MB_isWhole_andItsProgressMovesTo1() async throws {
        let payload = pattern(bytes: 2 * 1024 * 1024)
        let server = try server { _ in .response(status: 200, body: payload) }
        defer { server.stop() }
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("download-\(UUID()).bin")
        defer { try? FileManager.default.removeItem(at: destination) }
        let download = DownloadCommand(url: server.url("/file"), to: destination)
        let reports = Locked<[(Int64, Int64)]>([])
        download.add(
            observer: BlockObserver(didReportProgress: { _, done, total in reports.withLock { $0.append((done, total)) }
            }))
        let file = try await download.value
        #expect(file == destination)
        #expect(try Data(contentsOf: destination) == payload)
        #expect(download.fractionCompleted == 1)
        let seen = reports.withLock { $0 }
        #expect(seen.last.map { $0.0 == $0.1 && $0.1 == Int64(payload.count) } == true)
        #expect(seen.contains { $0.0 > 0 && $0.0 < $0.1 }, "values between 0 and 1: \(seen.count) reports")
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.0 <= $1.0 })
    }

    @Test func aFailedDownload_leavesTheDestinationAlone() async throws {
        let server = try server()
        defer { server.stop() }
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("download-\(UUID()).bin")
        let state = await terminalState(of: DownloadCommand(url: server.url("/missing"), to: destination), start: true)
        #expect((state.error as? HTTPError)?.body == Data("no such thing".utf8))
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }

    @Test func anUploadOf1MB_reachesTheServerWhole_withProgress() async throws {
        let server = try server { request in .response(status: 201, body: Data("\(request.body.count)".utf8)) }
        defer { server.stop() }
        let body = pattern(bytes: 1024 * 1024)
        let upload = UploadCommand(request: URLRequest(url: server.url("/upload")), body: body)
        let reports = Locked<[(Int64, Int64)]>([])
        upload.add(
            observer: BlockObserver(didReportProgress: { _, done, total in reports.withLock { $0.append((done, total)) }
            }))
        let response = try await upload.value
        #expect(response.status == 201)
        #expect(server.requests.last?.method == "POST")
        #expect(server.requests.last?.body == body, "the server saw every byte")
        let seen = reports.withLock { $0 }
        #expect(seen.last.map { $0.0 == Int64(body.count) } == true)
        #expect(seen.contains { $0.0 > 0 && $0.0 < $0.1 }, "values between 0 and 1: \(seen)")
    }

    @Test func fiftyRequests_inAGraph_aGroup_zipped_combined_andThroughFlatMap() async throws {
        let server = try server { request in .response(status: 200, body: Data(request.path.utf8)) }
        defer { server.stop() }
        let paths = (0..<50).map { "/item/\($0)" }

        let graph = Graph()
        let requests = paths.map { RequestCommand(url: server.url($0)) }
        for request in requests { try graph.add(request) }
        try graph.run()
        let outcome = await graph.outcome
        #expect(outcome.succeeded && outcome.completed.count == 50)
        #expect(graph.fractionCompleted == 1)

        let zipped = try await Command<HTTPResponse>.zip(paths.map { RequestCommand(url: server.url($0)) }).value
        #expect(zipped.map { String(decoding: $0.body, as: UTF8.self) } == paths)

        let group = GroupCommand(name: "fifty", children: paths.map { RequestCommand(url: server.url($0)) })
        group.maxConcurrentChildren = 10
        let grouped = try await group.value
        #expect(grouped.succeeded && grouped.completed.count == 50)

        let pair = try await combineLatest(
            RequestCommand(url: server.url("/left")), RequestCommand(url: server.url("/right"))
        ).value
        #expect(String(decoding: pair.0.body, as: UTF8.self) == "/left")
        #expect(String(decoding: pair.1.body, as: UTF8.self) == "/right")

        let subject = CommandSubject<String>()
        let bodies = Locked<[String]>([])
        let done = Checkpoint()
        subject.flatMap(maxConcurrent: 8) { path in RequestCommand(url: server.url(path)) }
            .execute(on: .immediate) { event in
                if let response = event.value {
                    bodies.withLock { $0.append(String(decoding: response.body, as: UTF8.self)) }
                }
                if event.isTerminal { done.fulfill() }
            }
        for path in paths { subject.send(path) }
        subject.complete()
        #expect(await done.wait())
        #expect(bodies.withLock { $0 }.sorted() == paths.sorted())
    }

    @Test func retryPolicy_table() {
        func decide(_ error: any Error) -> String { "\(NetworkRetryPolicy.decision(for: error))" }
        for status in [408, 429, 500, 502, 503, 504] { #expect(decide(HTTPError(status: status)) == "retry") }
        for status in [400, 401, 403, 404, 409, 422] { #expect(decide(HTTPError(status: status)) == "doNotRetry") }
        #expect(decide(HTTPError(status: 503, headers: ["retry-after": "2"])) == "retryWithDelay(2.0 seconds)")
        #expect(decide(HTTPError(status: 404, headers: ["Retry-After": "2"])) == "doNotRetry")
        for code in [
            URLError.Code.timedOut, .cannotConnectToHost, .networkConnectionLost, .notConnectedToInternet,
            .dnsLookupFailed, .cannotFindHost,
        ] {
            #expect(decide(URLError(code)) == "retry")
        }
        #expect(decide(URLError(.cancelled)) == "doNotRetry")
        #expect(decide(URLError(.badURL)) == "doNotRetry")
    }
}
