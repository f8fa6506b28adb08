import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// `a` then `b`, which fails with markup in its error on its first attempt.
struct Marked: DurableWorkflow {
    static let name = "marked"

    static func build(_ flow: DurableFlow, input: String) throws -> DurableStep<Int> {
        let a = flow.step("a") { _ in Command.just(1) }
        return flow.step("b", after: a) { context, a in
            Command<Int> { result in
                if context.attempt == 1 {
                    result.fail(TestFailure(message: "<script>alert('\(input)')</script> & more"))
                } else {
                    result.succeed(a + 1)
                }
                return nil
            }
        }
    }
}

/// The inspector's answers, as an app's own server would get them (`response(to:)`), and its server's
/// refusals; the pages in a browser are checked by scripts/check-inspector.py.
@Suite struct DurableInspectorTests {
    static func get(_ inspector: DurableInspector, _ target: String) async -> DurableInspector.Response {
        await inspector.response(to: .init(method: "GET", target: target))
    }

    static func text(_ response: DurableInspector.Response) -> String { String(decoding: response.body, as: UTF8.self) }

    @Test func aRunsPage_escapesItsError_andItsScriptCarriesThePagesNonce() async throws {
        guard let fresh = try await freshStore(.sqlite, Marked.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let id = "run \"1\"</script>"
        _ = try? await store.start(Marked.self, id: id, input: "x").value
        let inspector = DurableInspector(store: store)
        let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let page = await Self.get(inspector, "/run?id=\(encoded)")
        #expect(page.status == 200)
        let html = Self.text(page)
        #expect(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more"))
        #expect(!html.contains("<script>alert"))
        #expect(!html.contains("run \"1\"</script>"))
        // The page's one script, and the policy that lets only it run.
        let policy = page.headers.first { $0.name == "Content-Security-Policy" }?.value ?? ""
        let nonce = try #require(policy.split(separator: "'").first { $0.hasPrefix("nonce-") }).dropFirst(6)
        #expect(html.components(separatedBy: "<script").count == 2)
        #expect(html.contains("<script nonce=\"\(nonce)\">"))
        #expect(!policy.contains("unsafe-inline'; script") && policy.contains("default-src 'none'"))
        // The graph marks the failed step and the one after it on the critical path.
        let fragment = Self.text(await Self.get(inspector, "/run?id=\(encoded)&fragment=1"))
        #expect(fragment.contains("class=\"step failed critical\" data-step=\"b\""), "\(fragment)")
        #expect(fragment.contains("class=\"step completed critical\" data-step=\"a\""))
        #expect(!fragment.contains("<script"))
        // Two pages of the same run get different nonces.
        let again = await Self.get(inspector, "/run?id=\(encoded)")
        #expect(again.headers.first { $0.name == "Content-Security-Policy" }?.value != policy)
    }

    @Test func theAPI_listsCounts_andFilters() async throws {
        guard let fresh = try await freshStore(.sqlite, Marked.self, Observed.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        _ = try? await store.start(Marked.self, id: "m", input: "m", options: DurableRunOptions(tags: ["t"])).value
        Probe.failuresLeft.withLock { $0["inspector-o"] = 0 }
        _ = try await store.start(Observed.self, id: "o", input: "inspector-o").value
        let inspector = DurableInspector(store: store)
        func runs(_ query: String) async throws -> (ids: [String], counts: [String: Int]) {
            let response = await Self.get(inspector, "/api/runs\(query)")
            let object = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
            let runs = try #require(object["runs"] as? [[String: Any]])
            return (runs.compactMap { $0["id"] as? String }, object["counts"] as? [String: Int] ?? [:])
        }
        let all = try await runs("")
        #expect(all.ids == ["m", "o"] && all.counts == ["failed": 1, "completed": 1])
        #expect(try await runs("?state=failed").ids == ["m"])
        #expect(try await runs("?workflow=observed").ids == ["o"])
        #expect(try await runs("?tag=t").ids == ["m"])
        #expect(try await runs("?tag=t").counts == ["failed": 1])
        let bad = await Self.get(inspector, "/api/runs?state=lost")
        #expect(bad.status == 400 && Self.text(bad).contains("not a state"))
        let one = await Self.get(inspector, "/api/run?id=m")
        let object = try #require(try JSONSerialization.jsonObject(with: one.body) as? [String: Any])
        let steps = try #require(object["steps"] as? [[String: Any]])
        #expect(steps.map { $0["state"] as? String } == ["completed", "failed"])
        #expect((steps[1]["error"] as? String)?.contains("<script>alert('m')</script>") == true)
        #expect(await Self.get(inspector, "/api/run?id=nobody").status == 404)
        #expect(await Self.get(inspector, "/nowhere").status == 404)
        #expect(await inspector.response(to: .init(method: "DELETE", target: "/api/runs")).status == 405)
    }

    @Test func changes_needTheHeader_andTheToken_andRetryRunsTheFailedStepAgain() async throws {
        guard let fresh = try await freshStore(.sqlite, Marked.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let worker = try store.work(concurrency: 2)
        defer { Task { await worker.stop() } }
        _ = try? await store.enqueue(Marked.self, id: "m", input: "m").value
        let inspector = DurableInspector(store: store, token: "s3cret")
        func post(_ target: String, _ headers: [String: String]) async -> DurableInspector.Response {
            await inspector.response(to: .init(method: "POST", target: target, headers: headers))
        }
        #expect(await post("/api/retry?id=m", [:]).status == 403)
        #expect(await post("/api/retry?id=m", ["X-Durable-Token": ""]).status == 401)
        #expect(await post("/api/retry?id=m", ["X-Durable-Token": "s3creT"]).status == 401)
        #expect(try await store.runs(.run("m")).first?.state == .failed)
        #expect(await post("/api/retry?id=nobody", ["X-Durable-Token": "s3cret"]).status == 404)
        let retried = await post("/api/retry?id=m", ["x-durable-token": "s3cret"])
        #expect(retried.status == 200, "\(Self.text(retried))")
        #expect(await eventually { (try? await store.runs(.run("m")).first?.state) == .completed })
        let record = try #require(try await store.runs(.run("m")).first)
        #expect(record.steps.map(\.attempts) == [1, 2])
        // A completed run is not retried again; cancelling it changes nothing.
        #expect(await post("/api/retry?id=m", ["X-Durable-Token": "s3cret"]).status == 409)
        // Without a token, the header alone lets a change through (a page of another site cannot send it).
        let open = DurableInspector(store: store)
        #expect(await open.response(to: .init(method: "POST", target: "/api/cancel?id=m")).status == 403)
        #expect(
            await open.response(to: .init(method: "POST", target: "/api/cancel?id=m", headers: ["X-Durable-Token": ""]))
                .status == 200)
    }

    @Test func serving_beyondLoopback_needsAToken_andTheEventsFollowARun() async throws {
        guard let fresh = try await freshStore(.sqlite, Marked.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        #expect(throws: DurableError.self) { try DurableInspector(store: store).serve(host: "0.0.0.0", port: 0) }
        let server = try DurableInspector(store: store).serve(port: 0)
        defer { server.stop() }
        #expect(server.port > 0 && server.url.absoluteString == "http://127.0.0.1:\(server.port)/")
        // A port taken: a clear error.
        #expect(throws: DurableError.self) { try DurableInspector(store: store).serve(port: server.port) }
        // The events of one run, as a page's EventSource reads them.
        let events = DurableInspector(store: store).events(run: "m")
        let collected = Task {
            var lines: [String] = []
            for await event in events {
                lines.append(event)
                if event.contains("\"runEnded\"") { break }
            }
            return lines
        }
        _ = try? await store.start(Marked.self, id: "other", input: "o").value
        _ = try? await store.start(Marked.self, id: "m", input: "m").value
        // Events, and a comment every 15 s while nothing changes (a loaded machine may see one).
        let lines = await collected.value.filter { $0 != ": ping\n\n" }
        #expect(lines.allSatisfy { $0.hasPrefix("data: {") && $0.hasSuffix("}\n\n") && $0.contains("\"run\":\"m\"") })
        #expect(lines.count == 6, "\(lines)")  // created, a started and completed, b started and failed, ended
    }
}
