import CommandCore
import CommandTestSupport
import Dispatch
import Foundation
import Testing

private struct Boom: Error {}

@Suite struct AsyncBridgeTests {
    @Test func value_returnsTheLastValue_andRethrowsFailures() async throws {
        let command = Command<Int> { result in
            result.send(1)
            result.send(2)
            result.complete()
            return nil
        }
        #expect(try await command.value == 2)
        let failing = Command<Int> { result in
            result.fail(Boom())
            return nil
        }
        await #expect(throws: Boom.self) { try await failing.value }
        let empty = Command<Int> { result in
            result.complete()
            return nil
        }
        do {
            _ = try await empty.value
            Issue.record("no error")
        } catch let error as CommandError {
            #expect(error.code == .noValue)
        }
    }

    @Test func cancellingTheTask_cancelsTheCommand() async {
        let never = Command<Int> { result in BlockCancelable { _ = result } }
        let task = Task { try await never.value }
        await becameExecuting(never)
        task.cancel()
        let outcome = await task.result
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(never.isCancelled)
    }

    @Test func cancellingTheCommand_endsTheAwait() async {
        let never = Command<Int> { result in BlockCancelable { _ = result } }
        let task = Task { try await never.value }
        await becameExecuting(never)
        never.cancel()
        let outcome = await task.result
        #expect(throws: CancellationError.self) { try outcome.get() }
    }

    @Test func values_streamsEveryValue_andBreakingCancelsTheCommand() async throws {
        let finite = Command<Int> { result in
            for value in 0..<100 { result.send(value) }
            result.complete()
            return nil
        }
        var received: [Int] = []
        for try await value in finite.values { received.append(value) }
        #expect(received == Array(0..<100))

        let infinite = Command<Int> { result in
            result.send(1)
            result.send(2)
            return BlockCancelable { _ = result }
        }
        for try await value in infinite.values where value == 2 { break }
        guard case .cancelled = await terminalState(of: infinite) else { Issue.record("not cancelled"); return }
    }

    /// The original README's `excuteBlock` shape: work that reports later from another queue, with
    /// `return nil` (without it the closure no longer compiles as another initialiser that completes at
    /// once): the late value arrives.
    @Test func blockCommand_reportingLater_deliversTheLateValue() async {
        let command = Command<Int> { result in
            DispatchQueue.global().asyncAfter(deadline: .now()) { result.succeed(1) }
            return nil
        }
        let values = Locked<[Int]>([])
        let ended = Checkpoint()
        command.execute(on: .immediate) { event in
            if let value = event.value { values.withLock { $0.append(value) } }
            if event.isTerminal { ended.fulfill() }
        }
        #expect(await ended.wait())
        #expect(values.withLock { $0 } == [1])
        #expect(command.state.isTerminal)
    }

    /// The closure as a new user writes it: no `return nil`. It picks the form that waits for the
    /// terminal event (not `init(async:)`, which would complete at once and drop the value).
    @Test func blockCommand_withoutReturn_waitsForTheLateValue() async {
        let command = Command<Int> { result in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { result.succeed(1) }
        }
        let events = Locked<[String]>([])
        let ended = Checkpoint()
        command.execute(on: .immediate) { event in
            events.withLock { $0.append("\(event)") }
            if event.isTerminal { ended.fulfill() }
        }
        #expect(await ended.wait())
        #expect(events.withLock { $0 } == ["value(1)", "completed"])
    }

    @Test func asyncClosureCommands_runInATaskThatCancelCancels() async throws {
        let one = Command<String> { () async throws -> String in "fetched" }
        #expect(try await one.value == "fetched")

        let sawCancellation = Checkpoint()
        let streaming = Command<Int>(async: { result in
            result.send(1)
            // Waits for an element that never comes; the task's cancellation ends the wait.
            let (never, continuation) = AsyncStream<Int>.makeStream()
            for await _ in never {}
            withExtendedLifetime(continuation) {}
            if Task.isCancelled { sawCancellation.fulfill() }
        })
        let first = Checkpoint()
        streaming.execute(on: .immediate) { event in if case .value = event { first.fulfill() } }
        #expect(await first.wait())
        streaming.cancel()
        #expect(await sawCancellation.wait())
        #expect(streaming.isCancelled)
    }

    /// The README's async form, `Command { try await ... }`, ends once: no diagnostic of a second terminal
    /// event (it sent `[alreadyFinished] complete() was called after the terminal event` on every run).
    @Test func asyncValueCommand_endsOnce_withoutADiagnostic() async throws {
        let fetch = Command {
            try await Task.sleep(for: .milliseconds(1))
            return 42
        }
        let probe = DiagnosticsProbe(for: fetch)
        #expect(try await fetch.value == 42)
        // The diagnostic, when there is one, is sent by the task right after the value: wait for the task's
        // end through a second, later command on the same pool before reading.
        let after = Command { () async throws -> Int in 1 }
        #expect(try await after.value == 1)
        #expect(probe.diagnostics.isEmpty, "\(probe.diagnostics)")
    }
}
