import CommandTestSupport
import Foundation
import Testing

@testable import CommandCore

/// The command's state machine as a plain value: no threads, no queues, no locks.
@Suite struct StateMachineTests {
    typealias Machine = CommandStateMachine

    private func executing() -> Machine {
        var machine = Machine()
        guard case .claimed = machine.claim(walk: 1) else { Issue.record("claim failed"); return machine }
        machine.leaveStack(walk: 1)
        guard
            case .placed(.queue) = machine.register(
                walk: 1, admitting: false, makeQueue: { OperationQueue() })
        else {
            Issue.record("not enqueued"); return machine
        }
        guard case .run = machine.start(external: false) else { Issue.record("not run"); return machine }
        return machine
    }

    private func values(_ machine: inout Machine, observer: UInt64) -> [CommandEvent<Int>] {
        var events: [CommandEvent<Int>] = []
        while let event = machine.nextEvent(for: observer, as: Int.self) { events.append(event) }
        return events
    }

    /// A ready command that will run on a queue the engine makes asks for an admission slot first
    /// (no queue made yet); it holds the slot from hand-over until it starts, and gives it back once.
    @Test func readyCommand_onAnEngineQueue_goesThroughAdmission_andHoldsItsSlotUntilItStarts() {
        var machine = Machine()
        _ = machine.claim(walk: 1)
        machine.leaveStack(walk: 1)
        var made = 0
        guard
            case .placed(.admission) = machine.register(
                walk: 1, admitting: true,
                makeQueue: {
                    made += 1; return OperationQueue()
                })
        else {
            Issue.record("not sent to admission")
            return
        }
        #expect(made == 0)
        _ = machine.handOverAdmitted(
            slot: 17,
            makeQueue: {
                made += 1; return OperationQueue()
            })
        #expect(made == 1)
        guard case .run = machine.start(external: false) else {
            Issue.record("not run")
            return
        }
        #expect(machine.takeAdmission() == 17)
        #expect(machine.takeAdmission() == nil)

        // A queue the user assigned: straight to it, no slot.
        var assigned = Machine()
        assigned.queue.executeQueue = OperationQueue()
        assigned.queue.ownsQueue = false
        _ = assigned.claim(walk: 2)
        assigned.leaveStack(walk: 2)
        guard case .placed(.queue) = assigned.register(walk: 2, admitting: true, makeQueue: { OperationQueue() }) else {
            Issue.record("a user's queue went through admission")
            return
        }
    }

    @Test func lifecycle_goesFromPendingThroughExecutingToCompleted() {
        var machine = Machine()
        #expect(machine.state.isTerminal == false)
        machine = executing()
        guard case .executing = machine.state else { Issue.record("state \(machine.state)"); return }
        #expect(machine.isExecuting)
        let ending = machine.finish(.completed)
        #expect(ending?.wasExecuting == true)
        #expect(ending?.postFinished == true)
        guard case .completed = machine.state else { Issue.record("state \(machine.state)"); return }
        #expect(machine.isFinished && !machine.isExecuting && !machine.isCancelled)
    }

    @Test func terminal_firstOneWins_laterOnesAreIgnored() {
        var machine = executing()
        #expect(machine.finish(.completed) != nil)
        #expect(machine.finish(.failed(CocoaError(.featureUnsupported))) == nil)
        #expect(machine.terminate(.cancelled(.cancelled("x"))) == nil)
        #expect(machine.send(1) == nil)
        guard case .completed = machine.state else { Issue.record("state \(machine.state)"); return }
    }

    @Test func waiting_countsDependencies_andEnqueuesWhenTheLastFinishes() {
        var machine = Machine()
        let a = BlockOperation()
        let b = BlockOperation()
        _ = machine.addDependency(a, isSelf: false, typeName: "T")
        _ = machine.addDependency(b, isSelf: false, typeName: "T")
        guard case .claimed(let deps) = machine.claim(walk: 7) else { Issue.record("claim"); return }
        #expect(deps.count == 2)
        guard
            case .register(let registered) = machine.register(
                walk: 7, admitting: false, makeQueue: { OperationQueue() })
        else {
            Issue.record("register"); return
        }
        #expect(registered.count == 2)
        // The registration hold and one dependency: still waiting.
        guard case .none = machine.dependencyFinished(.completed, dependencyName: "", typeName: "T") else {
            Issue.record("enqueued too early"); return
        }
        guard case .none = machine.dependencyFinished(.completed, dependencyName: "a", typeName: "T") else {
            Issue.record("enqueued too early"); return
        }
        guard case .handOver = machine.dependencyFinished(.completed, dependencyName: "b", typeName: "T") else {
            Issue.record("not enqueued"); return
        }
    }

    @Test func dependencyFailure_endsTheCommandCancelled_namingTheDependency() {
        var machine = Machine()
        machine.name = "parse"
        _ = machine.addDependency(BlockOperation(), isSelf: false, typeName: "T")
        _ = machine.claim(walk: 1)
        _ = machine.register(walk: 1, admitting: false, makeQueue: { OperationQueue() })
        let action = machine.dependencyFinished(
            .failed(CocoaError(.fileNoSuchFile)), dependencyName: "fetch", typeName: "T")
        guard case .ended(let ending) = action, case .cancelled(let error) = ending.outcome else {
            Issue.record("not ended: \(action)"); return
        }
        #expect(error.code == .dependencyFailed)
        #expect(error.command == "parse")
        #expect(error.dependency == "fetch")
        #expect(machine.isCancelled)
    }

    @Test func claim_secondClaimOnStackReportsACycle() {
        var machine = Machine()
        guard case .claimed = machine.claim(walk: 3) else { Issue.record("claim"); return }
        guard case .onStack = machine.claim(walk: 3) else { Issue.record("no cycle"); return }
        machine.leaveStack(walk: 3)
        guard case .notPending = machine.claim(walk: 3) else { Issue.record("claimed twice"); return }
        guard case .notPending = machine.claim(walk: 4) else { Issue.record("stolen by another walk"); return }
    }

    /// Foundation's rule: a cancelled operation that nothing started stays unfinished until its queue
    /// (or `start()`, or `execute`) starts it; then it finishes without running.
    @Test func cancelBeforeAnythingStartedIt_staysUnfinished_untilStarted() {
        var machine = Machine()
        let ending = machine.terminate(.cancelled(.cancelled("x")))
        #expect(ending?.postFinished == false)
        #expect(machine.isCancelled)
        #expect(machine.isFinished == false)
        guard case .postFinished = machine.start(external: true) else { Issue.record("start"); return }
        #expect(machine.isFinished)
        guard case .none = machine.start(external: true) else { Issue.record("started twice"); return }
    }

    /// Executing a cancelled, never-started command starts it: the walk finishes it.
    @Test func cancelBeforeStart_thenExecuted_finishesInTheWalk() {
        var machine = Machine()
        _ = machine.terminate(.cancelled(.cancelled("x")))
        guard case .finishedNow = machine.claim(walk: 1) else { Issue.record("claim"); return }
        #expect(machine.isFinished)
        guard case .notPending = machine.claim(walk: 2) else { Issue.record("finished twice"); return }
    }

    /// Once the engine executed it, the engine owns the run: a cancel before it ran finishes it now
    /// (its block on the queue finds it finished and does nothing).
    @Test func cancelWhileEnqueued_finishesNow_andTheQueuedBlockDoesNothing() {
        var machine = Machine()
        _ = machine.claim(walk: 1)
        _ = machine.register(walk: 1, admitting: false, makeQueue: { OperationQueue() })
        let ending = machine.terminate(.cancelled(.cancelled("x")))
        #expect(ending?.postFinished == true)
        #expect(machine.isFinished)
        guard case .none = machine.start(external: false) else { Issue.record("ran after cancel"); return }
    }

    /// `start()` on a command whose run the engine already scheduled does not take the run over (the
    /// engine claimed it: it stays on its queue); the engine's block runs it, once.
    @Test func externalStart_whileEnqueued_leavesTheRunToTheEngine() {
        var machine = Machine()
        _ = machine.claim(walk: 1)
        _ = machine.register(walk: 1, admitting: false, makeQueue: { OperationQueue() })
        guard case .none = machine.start(external: true) else { Issue.record("taken over"); return }
        guard case .run = machine.start(external: false) else { Issue.record("not run"); return }
        guard case .none = machine.start(external: true) else { Issue.record("ran twice"); return }
    }

    /// A face value: readiness counts command dependencies, and a cancel makes the command ready.
    @Test func face_readiness_countsDependencies_andACancelMakesItReady() {
        var face = OperationFace()
        #expect(face.isReady && face.readinessTarget)
        face.dependencyAdded()
        face.dependencyAdded()
        #expect(!face.readinessTarget)
        face.dependenciesFinished = face.readinessTarget
        #expect(!face.isReady)
        face.dependencyGone()
        #expect(!face.readinessTarget)
        face.cancelled = true
        #expect(face.isReady)
        face.dependencyGone()
        #expect(face.readinessTarget)
    }

    @Test func delivery_isInOrder_andTheTerminalEventComesLast() {
        var machine = executing()
        let (id, wakeup) = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in })
        #expect(wakeup == nil)
        #expect(machine.send(1)?.count == 1)
        #expect(machine.send(2)?.isEmpty == true)  // already scheduled: no second drain
        _ = machine.finish(.completed)
        let events = values(&machine, observer: id)
        #expect(events.compactMap(\.value) == [1, 2])
        #expect(events.last?.isTerminal == true)
        #expect(machine.observerCount == 0)
    }

    /// A hot source's common case (replay `.none`, one idle `.immediate` observer, claimed in place):
    /// the value is counted, not stored; a value sent while the observer is busy is stored, pokes the
    /// claim, so its release without the lock is refused and the idle mark under the lock finds the
    /// value, which the caller drains.
    @Test func inPlaceClaim_withNothingKept_storesNothing_andIdlesOnlyWhenCaughtUp() {
        var machine = executing()
        let word = TestClaimWord()
        machine.replay = .none
        let (id, _) = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in })
        guard let (wakeups, claim) = machine.sendClaiming(1, word: word.word), let claim else {
            Issue.record("not claimed"); return
        }
        #expect(wakeups.isEmpty && claim.observer == id && claim.lockFree)
        #expect(machine.retainedValueCount == 0 && machine.log.endIndex == 1)
        // Another thread's value while the observer is claimed: kept for it, no second claim.
        guard let (_, second) = machine.sendClaiming(2, word: word.word) else { Issue.record("ignored"); return }
        #expect(second == nil && machine.retainedValueCount == 1)
        let idleWithValueWaiting = machine.endInPlace(claim, word: word.word)
        #expect(!idleWithValueWaiting, "value 2 waits: the caller drains")
        #expect(values(&machine, observer: id).compactMap(\.value) == [2])
        // Caught up: the next value is claimed in place again, and released without the lock.
        guard let (_, third) = machine.sendClaiming(3, word: word.word), let third else {
            Issue.record("not claimed"); return
        }
        #expect(third.observer == id && third.lockFree && machine.retainedValueCount == 0)
        #expect(word.word.release(), "nothing poked it")
        // A late observer gets nothing of what was sent (replay `.none`), then what comes.
        machine.settleInPlaceClaim(word.word)
        let late = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in }).id
        _ = machine.send(4)
        _ = machine.finish(.completed)
        #expect(values(&machine, observer: late).compactMap(\.value) == [4])
    }

    /// An in-place delivery holds its observer's sink unretained: an observer removed while claimed
    /// (a consumer cancelling during the delivery) keeps its sink alive until the claim's idle mark,
    /// which finds the observer gone and lets the sink go; an observer removed while idle lets it go
    /// at once. Both for a claim in the record (the first value, appended) and for one in the claim
    /// word (the next ones).
    @Test(arguments: [false, true])
    func anObserverRemovedWhileClaimed_keepsItsSink_untilTheIdleMark(inTheWord: Bool) {
        final class Sentinel: Sendable {}
        var machine = executing()
        let word = TestClaimWord()
        machine.replay = .latest
        weak var claimedSentinel: Sentinel?
        let id: UInt64
        do {
            let sentinel = Sentinel()
            claimedSentinel = sentinel
            id =
                machine.addObserver(
                    context: .immediate, sink: ObserverSink<Int>.values({ _ in _ = sentinel }, terminal: { _ in }),
                    as: .consumer
                ).id
        }
        if inTheWord {
            // The first value is appended (claimed in the record); the next replace it, claimed in the word.
            guard let (_, first) = machine.sendClaiming(0, word: word.word), let first else {
                Issue.record("not claimed"); return
            }
            let idleAfterFirst = machine.endInPlace(first, word: word.word)
            #expect(!first.lockFree && idleAfterFirst)
        }
        guard let (_, claim) = machine.sendClaiming(1, word: word.word), let claim else {
            Issue.record("not claimed"); return
        }
        #expect(claim.observer == id && claim.lockFree == inTheWord)
        // The consumer detaches during the delivery: the record goes, its sink stays.
        _ = machine.releaseConsumer(observer: id, word: word.word)
        #expect(machine.observerCount == 0)
        #expect(claimedSentinel != nil, "the sink the delivery is calling is still alive")
        let idle = machine.endInPlace(claim, word: word.word)
        #expect(idle)
        #expect(claimedSentinel == nil, "the idle mark let the retired sink go")
        #expect(word.word.isFree)

        // Removed while idle: nothing is retired.
        weak var idleSentinel: Sentinel?
        let second: UInt64
        do {
            let sentinel = Sentinel()
            idleSentinel = sentinel
            second =
                machine.addObserver(
                    context: .immediate, sink: ObserverSink<Int>.values({ _ in _ = sentinel }, terminal: { _ in })
                ).id
        }
        // Its replay (the latest value) delivered first: then it is idle.
        #expect(values(&machine, observer: second).compactMap(\.value) == [1])
        machine.removeObserver(second)
        #expect(idleSentinel == nil)
    }

    /// A kept stage's common case (replay `.latest`, one idle `.immediate` observer, claimed in place):
    /// the one kept value is replaced in place, so a late observer still gets the latest value; a value
    /// sent while the observer is busy is kept for it (the replacement is not taken).
    @Test func inPlaceClaim_withTheLatestKept_replacesIt_andALateObserverGetsTheLatest() {
        var machine = executing()
        let word = TestClaimWord()
        machine.replay = .latest
        let (id, _) = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in })
        // The first value: nothing kept yet, so the general path (append, claim in the record).
        guard let (_, first) = machine.sendClaiming(1, word: word.word), let first else {
            Issue.record("not claimed"); return
        }
        #expect(first.observer == id && !first.lockFree && machine.retainedValueCount == 1)
        let idleAfterFirst = machine.endInPlace(first, word: word.word)
        #expect(idleAfterFirst)
        // Then each value replaces the kept one, claimed in the same step, in the claim word.
        for value in [2, 3] {
            guard let (wakeups, claim) = machine.sendClaiming(value, word: word.word), let claim else {
                Issue.record("not claimed"); return
            }
            #expect(wakeups.isEmpty && claim.observer == id && claim.lockFree && machine.retainedValueCount == 1)
            #expect(machine.log.value(at: machine.log.endIndex - 1, as: Int.self) == value)
            let idle = machine.endInPlace(claim, word: word.word)
            #expect(idle)
        }
        // Busy (claimed, not yet idle): the next value is kept beside the latest, for the observer.
        guard let (_, claimed) = machine.sendClaiming(4, word: word.word), let claimed else {
            Issue.record("not claimed"); return
        }
        guard let (_, second) = machine.sendClaiming(5, word: word.word) else { Issue.record("ignored"); return }
        #expect(second == nil && machine.retainedValueCount == 1, "5 kept for the observer; 4 delivered")
        let idleWithFiveWaiting = machine.endInPlace(claimed, word: word.word)
        #expect(!idleWithFiveWaiting, "5 waits: the caller drains")
        #expect(values(&machine, observer: id).compactMap(\.value) == [5])
        let late = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in }).id
        _ = machine.finish(.completed)
        let lateValues = values(&machine, observer: late)
        #expect(lateValues.compactMap(\.value) == [5] && lateValues.last?.isTerminal == true)
    }

    /// The claim word's four moves, each as a thread would make it: a claim released without the
    /// lock; a claim poked (its release refused, cleared under the lock); a claim poked after its
    /// release (the poke says so and clears the word).
    @Test func theClaimWord_releasesUnpoked_refusesPoked_andAPokeAfterTheReleaseClearsIt() {
        let owner = TestClaimWord()
        defer { withExtendedLifetime(owner) {} }
        let word = owner.word
        #expect(word.isFree && !word.isClaimed)
        word.claim()
        #expect(word.isClaimed && !word.isFree)
        #expect(word.release() && word.isFree)
        word.claim()
        #expect(word.poke(), "still claimed: poked")
        #expect(!word.isClaimed && !word.isFree)
        #expect(!word.release(), "poked: the delivering thread must take the lock")
        #expect(!word.isClaimed && !word.isFree, "refused: nothing to settle, and not free until cleared")
        word.clear()
        #expect(word.isFree)
        word.claim()
        #expect(word.release())
        #expect(!word.poke(), "released before the poke")
        #expect(word.isFree)
    }

    /// A claim in the word, outstanding at the next lock round: settled into the record's `scheduled`
    /// flag (the observer is busy: a value waits for it, nothing is claimed twice); released before
    /// the next round: settled as idle, and the next value is claimed in place again.
    @Test func anOutstandingClaim_isSettledAtTheNextRound_asBusyOrIdle() {
        var machine = executing()
        let word = TestClaimWord()
        machine.replay = .latest
        let (id, _) = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in })
        guard let (_, first) = machine.sendClaiming(1, word: word.word), let first else { return }
        let idleAfterFirst = machine.endInPlace(first, word: word.word)
        #expect(idleAfterFirst)
        guard let (_, claim) = machine.sendClaiming(2, word: word.word), let claim, claim.lockFree else {
            Issue.record("not claimed in the word"); return
        }
        #expect(word.word.isClaimed && !machine.observers[0].scheduled, "the claim is in the word only")
        // Released: the next round finds the observer idle.
        #expect(word.word.release())
        machine.settleInPlaceClaim(word.word)
        #expect(!machine.observers[0].scheduled && word.word.isFree)
        // Outstanding: the next round marks the record scheduled and pokes the claim.
        guard let (_, again) = machine.sendClaiming(3, word: word.word), let again, again.lockFree else {
            Issue.record("not claimed in the word"); return
        }
        machine.settleInPlaceClaim(word.word)
        #expect(!word.word.isClaimed && machine.observers[0].scheduled && machine.observers[0].id == id)
        #expect(!word.word.release(), "poked")
        let idle = machine.endInPlace(again, word: word.word)
        #expect(idle && word.word.isFree)
        #expect(!machine.observers[0].scheduled)
    }

    /// A command ending (on another thread) while a value is delivered in place, through the
    /// command's own lock and claim word: the ending settles the claim, so the observer is not woken
    /// a second time; the delivering thread's release is refused, and its idle mark finds the
    /// terminal event waiting, which its drain delivers after the value.
    @Test func anEndingDuringAnInPlaceDelivery_waitsForTheDeliveringThread() {
        var machine = executing()
        machine.replay = .latest
        let id = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in }).id
        let lock = OwnedLocked(machine)
        defer { lock.destroy() }
        let first = lock.withLock { machine, word in machine.sendClaiming(1, word: word)?.claim }
        guard let first else { Issue.record("not claimed"); return }
        #expect(lock.withLock { machine, word in machine.endInPlace(first, word: word) })
        let claim = lock.withLock { machine, word in machine.sendClaiming(2, word: word)?.claim }
        guard let claim, claim.lockFree else { Issue.record("not claimed in the word"); return }
        let ending = lock.withLock { machine, word in machine.finish(.completed, word: word) }
        #expect(ending?.wakeups.isEmpty == true, "the observer is busy: nobody else may deliver to it")
        #expect(!lock.claimWord.release(), "the ending poked the claim")
        let idle = lock.withLock { machine, word -> Bool in
            word.clear()
            return machine.idleAfterInPlace(claim.observer, word: word)
        }
        #expect(!idle, "the terminal event waits: the delivering thread drains it")
        let drained = lock.withLock { machine, word in machine.nextEvent(for: id, as: Int.self, word: word) }
        #expect(drained?.isTerminal == true)
    }

    /// `replaceOnlyValue` writes in place only when the ring holds one value and is not shared: a copy
    /// of the log keeps its own value (copy on write), and a zero-sized type only counts.
    @Test func valueLog_replaceOnlyValue_onlyInPlace_andNeverThroughACopy() {
        var log = ValueLog()
        let replacedEmpty = log.replaceOnlyValue(with: "1")
        #expect(!replacedEmpty, "empty: nothing to replace")
        log.append("1")
        let replaced = log.replaceOnlyValue(with: "2")
        #expect(replaced)
        #expect(log.startIndex == 1 && log.endIndex == 2 && log.value(at: 1, as: String.self) == "2")
        let copy = log
        let replacedShared = log.replaceOnlyValue(with: "3")
        #expect(!replacedShared, "shared ring: not written in place")
        #expect(copy.value(at: 1, as: String.self) == "2")
        log.append("3")
        let replacedOfTwo = log.replaceOnlyValue(with: "4")
        #expect(!replacedOfTwo, "two values kept: not the only one")
        var void = ValueLog()
        void.append(())
        let replacedVoid = void.replaceOnlyValue(with: ())
        #expect(replacedVoid && void.startIndex == 1 && void.endIndex == 2)
    }

    @Test func cancel_dropsValuesNotYetClaimed() {
        var machine = executing()
        let (id, _) = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in })
        _ = machine.send(1)
        _ = machine.send(2)
        guard case .value(1) = machine.nextEvent(for: id, as: Int.self) else { Issue.record("first"); return }
        _ = machine.terminate(.cancelled(.cancelled("x")))
        let rest = values(&machine, observer: id)
        #expect(rest.count == 1)
        #expect(rest.first.map { if case .cancelled = $0 { true } else { false } } == true)
    }

    @Test func replay_all_givesALateObserverEveryValue() {
        var machine = executing()
        for value in 0..<5 { _ = machine.send(value) }
        _ = machine.finish(.completed)
        let (id, wakeup) = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in })
        #expect(wakeup != nil)
        #expect(values(&machine, observer: id).compactMap(\.value) == [0, 1, 2, 3, 4])
    }

    @Test func replay_latest_keepsOnlyTheLastValue_butNeverDropsUndelivered() {
        var machine = executing()
        machine.replay = .latest
        let (slow, _) = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in })
        for value in 0..<5 { _ = machine.send(value) }
        #expect(machine.retainedValueCount == 5)  // the slow observer has not read them yet
        let late = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in }).id
        #expect(values(&machine, observer: slow).compactMap(\.value) == [0, 1, 2, 3, 4])
        _ = machine.finish(.completed)
        #expect(values(&machine, observer: late).compactMap(\.value) == [0, 1, 2, 3, 4])
        let later = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in }).id
        #expect(values(&machine, observer: later).compactMap(\.value) == [4])
    }

    @Test func replay_none_keepsNothingForLateObservers() {
        var machine = executing()
        machine.replay = .none
        for value in 0..<5 { _ = machine.send(value) }
        #expect(machine.retainedValueCount == 0)
        _ = machine.finish(.completed)
        let id = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.events { _ in }).id
        let events = values(&machine, observer: id)
        #expect(events.count == 1 && events[0].isTerminal)
    }

    @Test func stateObservers_getExecutingThenTheTerminalState() {
        var machine = Machine()
        let id = machine.addObserver(context: .immediate, sink: ObserverSink<Int>.states { _ in }).id
        _ = machine.claim(walk: 1)
        _ = machine.register(walk: 1, admitting: false, makeQueue: { OperationQueue() })
        guard case .run(let wakeups) = machine.start(external: false) else { Issue.record("start"); return }
        #expect(wakeups.count == 1)
        _ = machine.finish(.completed)
        var states: [String] = []
        while let state = machine.nextState(for: id, as: Int.self) { states.append(state.description) }
        #expect(states == ["executing", "completed"])
    }

    @Test func addDependency_afterEnqueue_isRefused_andSelfDependencyIsRecorded() {
        var machine = Machine()
        let op = BlockOperation()
        guard case .none = machine.addDependency(op, isSelf: true, typeName: "T") else { Issue.record("self"); return }
        #expect(machine.misuse?.code == .selfDependency)
        var running = executing()
        guard case .failAfterStart = running.addDependency(op, isSelf: false, typeName: "T") else {
            Issue.record("late dependency accepted"); return
        }
        _ = running.finish(.completed)
        guard case .ignoredFinished = running.addDependency(op, isSelf: false, typeName: "T") else {
            Issue.record("dependency after finish accepted"); return
        }
    }

    @Test func valueLog_trimsAndIndexesAbsolutely() {
        var log = ValueLog()
        for value in 0..<1000 { log.append(value) }
        log.trim(below: 990)
        #expect(log.startIndex == 990 && log.endIndex == 1000)
        #expect(log.value(at: 995, as: Int.self) == 995)
        log.trim(below: 2000)
        #expect(log.isEmpty && log.startIndex == 1000)
        log.append(7)
        #expect(log.value(at: 1000, as: Int.self) == 7)
    }

    /// `Void` values are counted, not stored; indexes and trimming behave as for any other type.
    @Test func valueLog_ofAZeroSizedType_countsItsValues() {
        var log = ValueLog()
        #expect(log.isEmpty)
        for _ in 0..<5 { log.append(()) }
        #expect(log.startIndex == 0 && log.endIndex == 5 && !log.isEmpty)
        log.value(at: 4, as: Void.self)
        log.trim(below: 3)
        #expect(log.startIndex == 3 && log.endIndex == 5)
        log.trim(below: 10)
        #expect(log.isEmpty && log.startIndex == 5)
        var copy = log
        copy.append(())
        #expect(copy.endIndex == 6 && log.endIndex == 5)
    }
}

/// The gate and the hand-over as plain values: the stages in order (injections, conditions,
/// categories), the lane kept across the gate, and one placement decision for every path.
@Suite struct GateAndPlacementTests {
    private func gate(injections: Int, conditions: Int, categories: Set<String> = []) -> CommandCore.Gate {
        var gate = CommandCore.Gate()
        for _ in 0..<injections { gate.injections.append(Injection { _ in .applied }) }
        for _ in 0..<conditions { gate.add(BlockCondition { true }, categories: []) }
        if !categories.isEmpty { gate.add(MutuallyExclusive(category: categories.first!), categories: categories) }
        return gate
    }

    @Test func injections_areAStageOfTheirOwn_beforeTheConditions() {
        var gate = gate(injections: 2, conditions: 1)
        let step1 = gate.arrive(engine: true)
        #expect(step1 == .evaluate)
        #expect(gate.phase == .injecting)
        let step101 = gate.conditionsPassed()  // no condition's verdict counts before the injections
        #expect(!step101)
        let step2 = gate.takeInjections()
        #expect(step2.count == 2)
        #expect(gate.phase == .evaluating)
        let step102 = gate.takeInjections()  // applied once
        #expect(step102.isEmpty)
        let step3 = gate.conditionsPassed()
        #expect(step3)
        #expect(gate.phase == .open)
    }

    @Test func noInjection_goesStraightToTheConditions() {
        var gate = gate(injections: 0, conditions: 1, categories: ["disk"])
        let step4 = gate.arrive(engine: false)
        #expect(step4 == .evaluate)
        #expect(gate.phase == .evaluating)
        let step103 = gate.arrive(engine: true)  // the other path waits for the checks under way
        #expect(step103 == .wait)
        let step5 = gate.conditionsPassed()
        #expect(step5)
        #expect(gate.phase == .waitingForCategories)
        let step6 = gate.granted(9)
        #expect(step6)
        #expect(gate.phase == .open)
        let step7 = gate.takeEngineWaiting()
        #expect(step7 == (waiting: true, lane: false))
    }

    @Test func aFailedInjection_endsTheChecks_beforeAnyCondition() {
        var gate = gate(injections: 1, conditions: 1)
        _ = gate.arrive(engine: true)
        let step8 = gate.failed()
        #expect(step8)
        #expect(gate.phase == .failed)
        let step9 = gate.conditionsPassed()
        #expect(!step9)
        let step10 = gate.arrive(engine: false)
        #expect(step10 == .wait)
    }

    @Test func theDependencysLane_isKeptUntilTheGateOpens() {
        var gate = gate(injections: 1, conditions: 0)
        _ = gate.arrive(engine: true)
        gate.engineLane = true
        _ = gate.takeInjections()
        let step11 = gate.conditionsPassed()
        #expect(step11)
        let step12 = gate.takeEngineWaiting()
        #expect(step12 == (waiting: true, lane: true))
        let step104 = gate.takeEngineWaiting()  // taken once
        #expect(step104 == (waiting: false, lane: false))
    }

    /// `place` is the one decision: the `start()` that started the command first, then a combinator
    /// node in place, then admission for an engine queue, else its queue now.
    @Test func placement_isOneDecision_inItsOrder() {
        var started = CommandStateMachine()
        started.startedExternally = true
        started.queue.inPlace = true
        guard case .startedByCaller = started.place(makeQueue: { OperationQueue() }, admitting: true) else {
            Issue.record("a command start() started goes back to it")
            return
        }
        #expect(!started.queue.handedOver)

        var node = CommandStateMachine()
        node.queue.inPlace = true
        guard case .inPlace = node.place(makeQueue: { OperationQueue() }, admitting: true) else {
            Issue.record("a combinator node runs in place")
            return
        }
        #expect(node.queue.handedOver)

        var plain = CommandStateMachine()
        var made = 0
        guard
            case .admission = plain.place(
                makeQueue: {
                    made += 1; return OperationQueue()
                }, admitting: true)
        else {
            Issue.record("an engine queue goes through admission")
            return
        }
        #expect(made == 0)
        guard
            case .queue = plain.place(
                makeQueue: {
                    made += 1; return OperationQueue()
                }, admitting: false)
        else {
            Issue.record("a lane continuation gets its queue now")
            return
        }
        #expect(made == 1 && plain.queue.handedOver)

        var assigned = CommandStateMachine()
        let mine = OperationQueue()
        assigned.queue.executeQueue = mine
        guard case .queue(let queue) = assigned.place(makeQueue: { OperationQueue() }, admitting: true), queue === mine
        else {
            Issue.record("an assigned queue is used at once, never admitted")
            return
        }
    }
}

/// A claim word of a test's own (the machine's lock is not there).
final class TestClaimWord {
    let pointer = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
    var word: ClaimWord { ClaimWord(word: pointer) }
    init() { pointer.initialize(to: 0) }
    deinit { pointer.deallocate() }
}

/// A claim word nothing claims, for the machine's rounds in tests that make no in-place claim.
enum UnclaimedWord {
    nonisolated(unsafe) static let pointer: UnsafeMutablePointer<UInt32> = {
        let pointer = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        pointer.initialize(to: 0)
        return pointer
    }()
    static var word: ClaimWord { ClaimWord(word: pointer) }
}

/// The machine's functions that settle a claim first, for tests that make none.
extension CommandStateMachine {
    mutating func finish(_ outcome: Termination) -> Ending? { finish(outcome, word: UnclaimedWord.word) }
    mutating func succeed<Output: Sendable>(_ value: Output) -> Ending? { succeed(value, word: UnclaimedWord.word) }
    mutating func terminate(_ outcome: Termination) -> Ending? { terminate(outcome, word: UnclaimedWord.word) }
    mutating func releaseConsumer(observer: UInt64) -> Bool {
        releaseConsumer(observer: observer, word: UnclaimedWord.word)
    }
    mutating func removeObserver(_ id: UInt64) { removeObserver(id, word: UnclaimedWord.word) }
    mutating func nextEvent<Output: Sendable>(for observer: UInt64, as type: Output.Type) -> CommandEvent<Output>? {
        nextEvent(for: observer, as: type, word: UnclaimedWord.word)
    }
    mutating func nextState<Output: Sendable>(for observer: UInt64, as type: Output.Type) -> CommandState? {
        nextState(for: observer, as: type, word: UnclaimedWord.word)
    }
}

extension CommandStateMachine {
    /// A lock round of `Command.receive`: `send(_:claimInPlace:word:wakeups:claim:)` claiming in
    /// place, its results returned (nil: ignored).
    mutating func sendClaiming<Output: Sendable>(_ value: Output, word: ClaimWord) -> (
        wakeups: Wakeups, claim: InPlaceClaim?
    )? {
        var wakeups: Wakeups?
        var claim: InPlaceClaim?
        return send(value, claimInPlace: true, word: word, wakeups: &wakeups, claim: &claim)
            ? (wakeups ?? Wakeups(), claim) : nil
    }

    /// The end of an in-place delivery as `Command.drainInPlace` makes it: a claim in the word
    /// released without the lock if nothing poked it, else a lock round (the claim settled, the word
    /// cleared, the idle mark). True: idle; false: something waits (the caller drains).
    mutating func endInPlace(_ claim: InPlaceClaim, word: ClaimWord) -> Bool {
        if claim.lockFree && word.release() { return true }
        if claim.lockFree { word.clear() }
        return idleAfterInPlace(claim.observer, word: word)
    }
}
