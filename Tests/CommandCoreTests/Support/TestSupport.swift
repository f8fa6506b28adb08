import CommandTestSupport
import Dispatch
import Foundation

@testable import CommandCore

/// Tests lock with the library's pthread-based lock, not `Synchronization.Mutex`: ThreadSanitizer
/// cannot see the latter's futex on Linux and would report every access it guards as a race.
typealias Mutex<Value> = Locked<Value>

/// Records a command's events in arrival order and checks the delivery contract as they arrive:
/// never two deliveries at once, nothing after the terminal event.
final class Recorder<Output: Sendable>: Sendable {
    private struct State {
        var events: [CommandEvent<Output>] = []
        var eventsAfterTerminal = 0
        var terminals = 0
    }

    // Guards the recorded events.
    private let state = Mutex(State())
    private let inFlight = Atomic(0)
    private let overlaps = Atomic(0)
    let finished = Checkpoint()

    var handler: @Sendable (CommandEvent<Output>) -> Void {
        { [self] event in record(event) }
    }

    func record(_ event: CommandEvent<Output>) {
        if inFlight.add(1, ordering: .acquiringAndReleasing).newValue != 1 { overlaps.add(1, ordering: .relaxed) }
        let first = state.withLock { state -> Bool in
            if state.terminals > 0 { state.eventsAfterTerminal += 1 }
            state.events.append(event)
            if event.isTerminal { state.terminals += 1 }
            return event.isTerminal && state.terminals == 1
        }
        inFlight.subtract(1, ordering: .acquiringAndReleasing)
        if first { finished.fulfill() }
    }

    var events: [CommandEvent<Output>] { state.withLock { $0.events } }
    var values: [Output] { events.compactMap(\.value) }
    var terminal: CommandEvent<Output>? { events.last.flatMap { $0.isTerminal ? $0 : nil } }
    var terminalCount: Int { state.withLock { $0.terminals } }
    var eventsAfterTerminal: Int { state.withLock { $0.eventsAfterTerminal } }
    var overlapCount: Int { overlaps.load(ordering: .relaxed) }

    /// Waits for the terminal event; false if it did not come within the bound.
    func waitForTerminal(seconds: Double = 60) async -> Bool { await finished.wait(seconds: seconds) }
}

extension CommandEvent {
    var isCompleted: Bool {
        if case .completed = self { return true }
        return false
    }

    var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }

    var isFailed: Bool {
        if case .failed = self { return true }
        return false
    }

    var commandError: CommandError? { error as? CommandError }
}

/// A thread-safe log of strings (which command ran, in what order).
final class Log: Sendable {
    // Guards the entries.
    private let entries = Mutex<[String]>([])
    func append(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// Collects diagnostics about one command while alive.
final class DiagnosticsProbe: Sendable {
    private let token: any Cancelable

    init(for command: AnyObject) {
        let id = ObjectIdentifier(command)
        let box = ProbeBox()
        token = CommandDiagnostics.observe { diagnostic in
            if diagnostic.commandID == id { box.append(diagnostic) }
        }
        self.box = box
    }

    private let box: ProbeBox

    var diagnostics: [CommandDiagnostic] { box.all }

    deinit { token.cancel() }
}

final class ProbeBox: Sendable {
    private let entries = Mutex<[CommandDiagnostic]>([])
    func append(_ entry: CommandDiagnostic) { entries.withLock { $0.append(entry) } }
    var all: [CommandDiagnostic] { entries.withLock { $0 } }
}

/// A thread that runs its own RunLoop until stopped, like an app's UI thread.
final class RunLoopThread: @unchecked Sendable {
    // `loop` and `threadID` are written once on the thread before `ready` is fulfilled and read after,
    // behind a lock: ThreadSanitizer does not see the hand-over through the checkpoint's
    // continuation. `stopped` is atomic.
    private let identity = Mutex<(loop: RunLoop?, thread: ObjectIdentifier?)>((nil, nil))
    var loop: RunLoop? { identity.withLock { $0.loop } }
    var threadID: ObjectIdentifier? { identity.withLock { $0.thread } }
    private let stopped = Atomic(false)
    let ready = Checkpoint()

    func start() {
        let thread = Thread { [self] in
            let loop = RunLoop.current
            // A far-future timer keeps the loop from returning at once for lack of sources.
            loop.add(Timer(timeInterval: 3600, repeats: true) { _ in }, forMode: .default)
            identity.withLock { $0 = (loop, ObjectIdentifier(Thread.current)) }
            ready.fulfill()
            while !stopped.load(ordering: .acquiring) {
                _ = loop.run(mode: .default, before: Date(timeIntervalSinceNow: 0.05))
            }
        }
        thread.start()
    }

    func stop() { stopped.store(true, ordering: .releasing) }

    var isCurrent: Bool { threadID == ObjectIdentifier(Thread.current) }
}
