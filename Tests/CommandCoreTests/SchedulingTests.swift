import CommandTestSupport
import Foundation
import Testing

@testable import CommandCore

/// Records the order in which admitted candidates are handed over.
private final class FakeCandidate: CommandNode, @unchecked Sendable {
    // `@unchecked Sendable`: immutable fields; `Log` guards itself.
    let index: Int
    let log: Log
    init(_ index: Int, log: Log) {
        self.index = index
        self.log = log
        super.init()
    }
    override func handOverAdmitted(slot: Int) -> Bool {
        log.append("\(index)")
        return true
    }
}

/// A command that records the admission state of its class when it runs.
private func probe(_ name: String, _ counter: Counter) -> Command<Void> {
    let command = Command<Void> { result in
        counter.observe(Admission.snapshot(slot: QualityOfService.utility.rawValue))
        result.succeed()
        return nil
    }
    command.name = name
    command.qualityOfService = .utility
    return command
}

/// Counts runs and the largest admission figures any run saw.
private final class Counter: Sendable {
    private struct State {
        var runs = 0
        var maxInFlight = 0
        var maxWaiting = 0
    }
    // Guards the figures.
    private let state = Locked(State())
    func observe(_ snapshot: (waiting: Int, inFlight: Int)) {
        state.withLock {
            $0.runs += 1
            $0.maxInFlight = max($0.maxInFlight, snapshot.inFlight)
            $0.maxWaiting = max($0.maxWaiting, snapshot.waiting)
        }
    }
    var runs: Int { state.withLock { $0.runs } }
    var maxInFlight: Int { state.withLock { $0.maxInFlight } }
}

extension CommandState {
    fileprivate var isCompleted: Bool {
        if case .completed = self { return true }
        return false
    }
}

/// Admission (a bound on ready commands waiting in queues), lanes (the first dependent made ready
/// continues on a serial lane) and the live command count. Serialized: the tests read the admission
/// figures of the `.utility` class, which only this suite uses.
@Suite(.serialized) struct SchedulingTests {
    /// The bound as a value: the first `limit` admissions go through, the rest wait and are handed
    /// over first in, first out, one per start; slots are returned when nobody waits.
    @Test func admission_admitsUpToTheLimit_thenHandsOverInArrivalOrder() {
        let slot = 10_001  // a class of its own: no command uses it
        let log = Log()
        let extra = 5
        var admitted = 0
        for index in 0..<(Admission.limit + extra) {
            if Admission.admit(FakeCandidate(index, log: log), slot: slot) { admitted += 1 }
        }
        #expect(admitted == Admission.limit)
        #expect(Admission.snapshot(slot: slot) == (extra, Admission.limit))
        for _ in 0..<extra { Admission.started(slot: slot) }
        #expect(log.all == (Admission.limit..<(Admission.limit + extra)).map { "\($0)" })
        #expect(Admission.snapshot(slot: slot) == (0, Admission.limit))
        for _ in 0..<Admission.limit { Admission.started(slot: slot) }
        #expect(Admission.snapshot(slot: slot) == (0, 0))
    }

    /// A long backlog, handed over while more arrive (its front is dropped as it drains, past 4,096
    /// handed over): still first in, first out, nothing lost or repeated.
    @Test func admission_aLongBacklog_drainedWhileItGrows_staysInArrivalOrder() {
        let slot = 10_002  // a class of its own: no command uses it
        let log = Log()
        var next = 0
        func admit(_ count: Int) {
            for _ in 0..<count {
                _ = Admission.admit(FakeCandidate(next, log: log), slot: slot)
                next += 1
            }
        }
        admit(Admission.limit + 6_000)
        for round in 0..<20 {
            // Never more starts than commands waiting: each start hands one over.
            let starts = min(700, Admission.snapshot(slot: slot).waiting)
            for _ in 0..<starts { Admission.started(slot: slot) }
            admit(round.isMultiple(of: 2) ? 500 : 0)
        }
        let waiting = Admission.snapshot(slot: slot).waiting
        for _ in 0..<waiting { Admission.started(slot: slot) }
        let handed = log.all.compactMap(Int.init)
        #expect(next == Admission.limit + 11_000)
        #expect(handed.count == next - Admission.limit)
        #expect(handed.elementsEqual(Admission.limit..<next), "not in arrival order")
        #expect(Admission.snapshot(slot: slot) == (0, Admission.limit))
        for _ in 0..<Admission.limit { Admission.started(slot: slot) }
        #expect(Admission.snapshot(slot: slot) == (0, 0))
    }

    /// A fan-out much wider than the bound: every command runs once, after the root, and no run
    /// ever saw more slots taken than the bound; every slot is returned.
    @Test func wideFanOut_runsEveryCommandOnce_withinTheBound() async {
        let counter = Counter()
        let root = probe("root", counter)
        let width = Admission.limit * 20
        let dependents = (0..<width).map { probe("d\($0)", counter) }
        let done = Checkpoint(count: width)
        for dependent in dependents {
            dependent.addDependency(root)
            dependent.execute(on: .immediate) { event in if event.isTerminal { done.fulfill() } }
        }
        #expect(await done.wait())
        #expect(counter.runs == width + 1)
        #expect(dependents.allSatisfy { $0.state.isCompleted })
        #expect(counter.maxInFlight <= Admission.limit)
    }

    /// Commands on a queue the user owns never hold a slot: a suspended queue holding more commands
    /// than the bound does not stop the engine's own commands of the same class.
    @Test func commandsOnAUsersQueue_holdNoSlot() async {
        let userQueue = OperationQueue()
        userQueue.isSuspended = true
        let held = (0..<(Admission.limit * 2)).map { index -> Command<Void> in
            let command = Command<Void> { result in
                result.succeed()
                return nil
            }
            command.name = "held \(index)"
            command.qualityOfService = .utility
            command.executeQueue = userQueue
            return command
        }
        let heldDone = Checkpoint(count: held.count)
        for command in held { command.execute(on: .immediate) { if $0.isTerminal { heldDone.fulfill() } } }

        let counter = Counter()
        let engine = (0..<(Admission.limit * 2)).map { probe("engine \($0)", counter) }
        let engineDone = Checkpoint(count: engine.count)
        for command in engine { command.execute(on: .immediate) { if $0.isTerminal { engineDone.fulfill() } } }
        #expect(await engineDone.wait())
        #expect(!heldDone.isFulfilled)

        userQueue.isSuspended = false
        #expect(await heldDone.wait())
        #expect(held.allSatisfy { $0.state.isCompleted })
    }

    /// Commands cancelled while they may wait for a slot still end once, cancelled, and the others
    /// run: the slots they took or waited for are not lost.
    @Test func cancelledWhileWaitingForASlot_endsOnce_andLosesNoSlot() async {
        let counter = Counter()
        let tracker = LeakTracker()
        let width = Admission.limit * 4
        do {
            let gate = CommandSubject<Void>()
            let dependents = (0..<width).map { probe("c\($0)", counter) }
            let done = Checkpoint(count: width)
            for dependent in dependents {
                dependent.addDependency(gate)
                dependent.execute(on: .immediate) { event in if event.isTerminal { done.fulfill() } }
                tracker.track(dependent)
            }
            gate.complete()  // all become ready at once: most wait for a slot
            for (index, dependent) in dependents.enumerated() where index % 2 == 1 { dependent.cancel() }
            #expect(await done.wait())
            for (index, dependent) in dependents.enumerated() where index % 2 == 0 {
                #expect(dependent.state.isCompleted)
            }
        }
        #expect(counter.runs <= width)
        #expect(counter.runs >= width / 2)
        // Released means every command went through its queue's start(), cancelled ones included:
        // then every slot of the class is back and nothing waits.
        #expect(await tracker.waitForRelease() == [])
        #expect(Admission.snapshot(slot: QualityOfService.utility.rawValue) == (0, 0))
    }

    /// In a chain every command but the first continues on a lane queue; in a fan-out only one of
    /// the dependents made ready together does, the others run on plain queues (in parallel). On a
    /// lane, the lane's own identity (what `start()` reads instead of `OperationQueue.current`) names
    /// the queue Foundation names; off a lane it is nil.
    @Test func firstDependentMadeReady_continuesOnALane_theOthersDoNot() async {
        #expect(LaneQueue.running == nil)
        let log = Log()
        func recording(_ name: String) -> Command<Void> {
            let command = Command<Void> { result in
                let named = LaneQueue.running == OperationQueue.current.map(ObjectIdentifier.init)
                log.append(
                    "\(name):\(OperationQueue.current is LaneQueue ? "lane" : "plain")\(named ? "" : ": another queue")"
                )
                result.succeed()
                return nil
            }
            command.name = name
            return command
        }
        // A gate holds the first command until every command was registered with its dependency:
        // each one is then made ready by the end of the one before it, never by its registration.
        let gate = CommandSubject<Void>()
        let chain = (0..<5).map { recording("c\($0)") }
        chain[0].addDependency(gate)
        for index in 1..<chain.count { chain[index].addDependency(chain[index - 1]) }
        let chainDone = Checkpoint()
        chain[4].execute(on: .immediate) { if $0.isTerminal { chainDone.fulfill() } }
        gate.complete()
        #expect(await chainDone.wait())
        #expect(log.all == ["c0:lane", "c1:lane", "c2:lane", "c3:lane", "c4:lane"])

        let fanLog = Log()
        let root = CommandSubject<Void>()
        let fan = (0..<8).map { index -> Command<Void> in
            let command = Command<Void> { result in
                let onLane = OperationQueue.current is LaneQueue
                // Off a lane, no lane's identity.
                fanLog.append(onLane ? "lane" : LaneQueue.running == nil ? "plain" : "plain: a lane's identity")
                result.succeed()
                return nil
            }
            command.addDependency(root)
            return command
        }
        let done = Checkpoint(count: fan.count)
        for command in fan { command.execute(on: .immediate) { if $0.isTerminal { done.fulfill() } } }
        root.complete()  // all eight made ready by one ending
        #expect(await done.wait())
        #expect(fanLog.all.filter { $0 == "lane" }.count == 1)
        #expect(fanLog.all.filter { $0 == "plain" }.count == 7)
    }

    /// A lane goes back to the pool only when nothing of anyone else's is on it. A command made ready
    /// by its dependency's end (so on a lane) adds an operation to its `executeQueue` (the documented
    /// way to get "its own queue") that holds that serial queue until 100 later, unrelated commands
    /// (each with a dependency of its own) have completed, or 10 s. Before, its lane went back to the
    /// pool under the operation, later commands were queued behind it and waited its whole length
    /// (100 measured, worst 1,499 ms behind a 1.5 s operation); now none does.
    @Test func laneHeldByAUsersOperation_isNotGivenToLaterCommands() async {
        let later = 100
        let laterDone = Checkpoint(count: later)
        let gate = DispatchSemaphore(value: 0)
        let released = Checkpoint()
        let releasedByTheEvent = Locked(false)
        let dependency = Command<Void> { result in result.succeed() }
        let holder = Command<Void> { result in
            // The user's work: it lasts until the later commands ended (bounded).
            result.command.executeQueue.addOperation {
                let byEvent = gate.wait(timeout: .now() + 10) == .success
                releasedByTheEvent.withLock { $0 = byEvent }
                released.fulfill()
            }
            result.succeed()
            return nil
        }
        holder.addDependency(dependency)
        let holderDone = Checkpoint()
        holder.execute(on: .immediate) { if $0.isTerminal { holderDone.fulfill() } }
        #expect(await holderDone.wait())

        let worst = Locked(0.0)
        var keep: [Command<Void>] = []
        for _ in 0..<later {
            let own = Command<Void> { result in result.succeed() }
            let command = Command<Void> { result in result.succeed() }
            command.addDependency(own)
            keep.append(command)
            let executed = CommandTiming.now
            command.execute(on: .immediate) { event in
                guard event.isTerminal else { return }
                let latency = Double(CommandTiming.now - executed) / 1e9
                worst.withLock { $0 = max($0, latency) }
                laterDone.fulfill()
            }
        }
        // Every later command ends while the user's operation still holds its lane.
        #expect(await laterDone.wait(seconds: 30))
        gate.signal()
        #expect(await released.wait())
        #expect(releasedByTheEvent.withLock { $0 })
        #expect(worst.withLock { $0 } < 1.0)
        withExtendedLifetime(keep) {}
    }

    /// Every command is counted while alive.
    @Test func liveCommands_countsTheCommandsAlive() {
        let commands = (0..<1_000).map { _ in Command<Void>() }
        #expect(CommandDiagnostics.liveCommands >= commands.count)
        withExtendedLifetime(commands) {}
    }
}
