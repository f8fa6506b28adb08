import CommandDurable
import CommandTestSupport
import Foundation
import Testing

/// `durable`, run as a user runs it (the built executable, a child process): its output, its JSON, its
/// exit statuses, and a PostgreSQL password never taken from the command line nor printed.
@Suite struct DurableCommandLineTests {
    static var executable: URL {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for folder in [beside, beside.deletingLastPathComponent()] {
            let candidate = folder.appendingPathComponent("durable")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return URL(fileURLWithPath: ".build/debug/durable")
    }

    struct Output {
        let status: Int32
        let out: String
        let err: String
    }

    /// Runs `durable arguments` (its environment `environment` added), waiting without blocking a thread.
    static func durable(_ arguments: [String], environment: [String: String] = [:]) async throws -> Output {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let status = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<Int32, any Error>) in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        return Output(
            status: status, out: String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
            err: String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    @Test(arguments: StoreKind.allCases)
    func listsShowsCancelsRetriesAndPrunes_withStatusesAScriptCanRelyOn(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Retried.self, Stuck.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let tag = "\(kind)-cli"
        Probe.failuresLeft.withLock { $0["\(tag)-bad"] = 1 }
        _ = try await store.start(Retried.self, id: "ok", input: "\(tag)-ok").value
        _ = try? await store.start(Retried.self, id: "bad", input: "\(tag)-bad").value
        _ = try await store.enqueue(
            Stuck.self, id: "waiting", input: .init(tag: tag), options: .init(tags: ["user:42"]))
        // A PostgreSQL URL without its password; the password from the environment.
        var location = fresh.place.location
        var environment: [String: String] = [:]
        if kind == .postgres, var components = URLComponents(string: location) {
            environment["PGPASSWORD"] = components.password
            components.password = nil
            location = components.string ?? location
        }
        func durable(_ arguments: [String]) async throws -> Output {
            try await Self.durable(["--store", location] + arguments, environment: environment)
        }

        let listed = try await durable(["runs", "--json"])
        #expect(listed.status == 0, "\(listed.err)")
        let runs = try #require(try JSONSerialization.jsonObject(with: Data(listed.out.utf8)) as? [[String: Any]])
        #expect(runs.map { "\($0["id"]!)=\($0["state"]!)" } == ["ok=completed", "bad=failed", "waiting=running"])

        let failed = try await durable(["runs", "--state", "failed"])
        #expect(failed.status == 0 && failed.out.contains("bad") && !failed.out.contains("ok "), "\(failed.out)")
        let tagged = try await durable(["runs", "--tag", "user:42", "--json"])
        #expect(tagged.out.contains("\"waiting\"") && !tagged.out.contains("\"bad\""), "\(tagged.out)")

        let shown = try await durable(["show", "bad", "--json"])
        let run = try #require(try JSONSerialization.jsonObject(with: Data(shown.out.utf8)) as? [String: Any])
        let steps = try #require(run["steps"] as? [[String: Any]])
        #expect(steps.map { "\($0["id"]!)=\($0["state"]!)" } == ["a=completed", "b=failed", "c=cancelled"])
        #expect((steps[1]["error"] as? String)?.contains("flaky attempt 1") == true)
        #expect(steps[2]["after"] as? [String] == ["a", "b"])
        let text = try await durable(["show", "bad"])
        #expect(text.out.contains("graph:") && text.out.contains("a, b -> c"), "\(text.out)")

        #expect(try await durable(["retry", "bad"]).status == 0)
        #expect(try await store.runs().first { $0.id == "bad" }?.state == .running)
        let notRetryable = try await durable(["retry", "ok"])
        #expect(notRetryable.status == 4 && notRetryable.err.contains("completed"), "\(notRetryable.err)")
        #expect(try await durable(["cancel", "waiting"]).status == 0)
        #expect(try await store.runs().first { $0.id == "waiting" }?.state == .cancelled)
        #expect(try await durable(["cancel", "nobody"]).status == 3)
        #expect(try await durable(["show", "nobody"]).status == 3)
        let unknown = try await durable(["frobnicate"])
        #expect(unknown.status == 2 && unknown.err.contains("unknown command"), "\(unknown.err)")
        #expect(try await durable(["prune"]).status == 2)
        let pruned = try await durable(["prune", "--ended-before", "0s"])
        #expect(pruned.status == 0 && pruned.out.contains("pruned 2 run(s)"), "\(pruned.out)")  // ok and waiting
        #expect(try await store.runs().map(\.id) == ["bad"])
        try await store.cancel(runID: "bad")
    }

    @Test func watch_printsARunsChanges_andEndsWithIt() async throws {
        guard let fresh = try await freshStore(.sqlite, Approval.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        let run = try await store.start(Approval.self, id: "w", input: .init(tag: "cli-watch"))
        #expect(await eventually { (try? await store.runs().first?.steps.first?.nextAttempt) != nil })
        let watching = Task { try await Self.durable(["--store", fresh.place.location, "watch", "w"]) }
        try await store.send("yes", event: "approval", toRun: "w")
        #expect(try await run.value == "got yes")
        let watched = try await watching.value
        #expect(watched.status == 0, "\(watched.err)")
        #expect(
            watched.out.contains(" w/answer completed #1") && watched.out.contains(" w completed"), "\(watched.out)")
        #expect(try await Self.durable(["--store", fresh.place.location, "watch", "nobody"]).status == 3)
    }

    @Test(arguments: StoreKind.allCases)
    func watch_withoutARun_printsAnotherProcesssChanges_asJSONLines(kind: StoreKind) async throws {
        guard let fresh = try await freshStore(kind, Observed.self) else { return }
        defer { fresh.close() }
        let store = fresh.store
        var location = fresh.place.location
        var environment = ProcessInfo.processInfo.environment
        if kind == .postgres, var components = URLComponents(string: location) {
            environment["PGPASSWORD"] = components.password
            components.password = nil
            location = components.string ?? location
        }
        let process = Process()
        process.executableURL = Self.executable
        process.arguments = ["--store", location, "watch", "--json"]
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        let printed = Locked("")
        let seen = Locked<[(String, Checkpoint)]>([])
        out.fileHandleForReading.readabilityHandler = { handle in
            let text = printed.withLock { printed in
                printed += String(decoding: handle.availableData, as: UTF8.self)
                return printed
            }
            for (needle, checkpoint) in seen.withLock({ $0 }) where text.contains(needle) { checkpoint.fulfill() }
        }
        func printedLine(containing needle: String) async -> Bool {
            let checkpoint = Checkpoint()
            seen.withLock { $0.append((needle, checkpoint)) }
            if printed.withLock({ $0.contains(needle) }) { return true }
            return await checkpoint.wait()
        }
        try process.run()
        defer {
            process.terminate()
            out.fileHandleForReading.readabilityHandler = nil
        }
        // This store publishes once it has seen the watcher (within about 1 s): runs until one is printed.
        let probing = Task {
            var index = 0
            while !Task.isCancelled {
                index += 1
                _ = try? await store.start(Observed.self, id: "probe-\(index)", input: "\(kind)-cli-probe-\(index)")
                    .value
            }
        }
        #expect(await printedLine(containing: #""run":"probe-"#))
        probing.cancel()
        _ = await probing.value
        let tag = "\(kind)-cli-watched"
        Probe.failuresLeft.withLock { $0[tag] = 1 }
        #expect(try await store.start(Observed.self, id: "o", input: tag).value == 3)
        #expect(await eventually { printed.withLock { $0.contains(#""run":"o","state":"completed""#) } })
        let changes = printed.withLock { $0 }.split(separator: "\n").compactMap {
            try? JSONDecoder().decode(DurableChange.self, from: Data($0.utf8))
        }.filter { $0.run == "o" }
        #expect(changes.map(\.description) == DurableChangesTests.expected, "\(changes.map(\.description))")
    }

    @Test func help_andAStoreThatIsNotThere() async throws {
        let help = try await Self.durable(["--help"])
        #expect(help.status == 0 && help.out.contains("usage: durable"))
        let runsHelp = try await Self.durable(["runs", "--help"])
        #expect(runsHelp.status == 0 && runsHelp.out.contains("usage: durable runs"))
        let serveHelp = try await Self.durable(["serve", "--help"])
        #expect(serveHelp.status == 0 && serveHelp.out.contains("usage: durable serve"))
        let missing = try await Self.durable(["--store", "/nonexistent/work.sqlite", "runs"])
        #expect(missing.status == 3 && missing.err.contains("no store"), "\(missing.err)")
        #expect(!FileManager.default.fileExists(atPath: "/nonexistent/work.sqlite"))
        let none = try await Self.durable(["runs"], environment: ["DURABLE_STORE": ""])
        #expect(none.status == 2 && none.err.contains("DURABLE_STORE"), "\(none.err)")
    }

    @Test func serve_beyondLoopbackWithoutAToken_isRefused() async throws {
        guard let fresh = try await freshStore(.sqlite, Observed.self) else { return }
        defer { fresh.close() }
        let refused = try await Self.durable(["--store", fresh.place.location, "serve", "--host", "0.0.0.0"])
        #expect(refused.status == 2 && refused.err.contains("token"), "\(refused.err)")
        let badPort = try await Self.durable(["--store", fresh.place.location, "serve", "--port", "70000"])
        #expect(badPort.status == 2 && badPort.err.contains("not a port"), "\(badPort.err)")
    }

    @Test func aPasswordOnTheCommandLine_isRefused_andNeverPrinted() async throws {
        let refused = try await Self.durable(["--store", "postgresql://app:s3cret@127.0.0.1:1/app", "runs"])
        #expect(refused.status == 2)
        #expect(refused.err.contains("PGPASSWORD") && !refused.err.contains("s3cret"), "\(refused.err)")
        // From the environment it is taken, and a failure to connect does not print it.
        let unreachable = try await Self.durable(
            ["runs"], environment: ["DURABLE_STORE": "postgresql://app:s3cret@127.0.0.1:1/app"])
        #expect(unreachable.status == 1 && !unreachable.err.contains("s3cret") && !unreachable.out.contains("s3cret"))
    }
}
