import CommandGraph
import CommandTestSupport
import Testing

private struct Boom: Error {}

/// The scripted scenarios of `shared/notes/semantics.md` and the rows of its table, as marble
/// diagrams on a virtual clock (one character per tick; see `Marbles`).
@Suite struct CombineLatestMarbleTests {
    @Test func emitsLatestOfEach_onceAllSent_completesAfterTheLastInput() {
        // a:1, b:x, a:2, b:y, b:completed, a:completed -> (1,x), (2,x), (2,y), completed
        let m = Marbles()
        let output = combineLatest(m.input("1-2--|"), m.input("-x-y|")).map { $0 + $1 }
        #expect(m.run(output) == "-{1x}{2x}{2y}-|")
    }

    @Test func inputCompletingWithoutAValue_meansNoValueEver_butCompletion() {
        // a:1, b:completed, a:2, a:completed -> completed, no value
        let m = Marbles()
        #expect(m.run(combineLatest(m.input("1-2|"), m.input("-|")).map { $0 + $1 }) == "---|")
    }

    @Test func firstFailure_failsTheNode_andCancelsTheOtherInputs() {
        let m = Marbles()
        let other = m.input("a----|")
        #expect(m.run(combineLatest(m.input("1-#"), other).map { $0 + $1 }) == "{1a}-#")
        #expect(other.isCancelled)
    }

    @Test func arrayForm_andReduce() {
        let m = Marbles()
        let array = Command.combineLatest([m.input("1-3|"), m.input("-2|")]).map { $0.joined() }
        #expect(m.run(array) == "-{12}{32}|")
        let m2 = Marbles()
        let reduced = combineLatest(m2.input("1-3|"), m2.input("-2|")) { $0 + "+" + $1 }
        #expect(m2.run(reduced) == "-{1+2}{3+2}|")
        let m3 = Marbles()
        #expect(m3.run(Command<String>.combineLatest([]).map { $0.joined() }) == "|")
    }

    @Test func throwingReduce_failsTheNode() {
        let m = Marbles()
        let output = combineLatest(m.input("1-2|"), m.input("a|")) { (x: String, y: String) throws -> String in
            if x == "2" { throw Boom() }
            return x + y
        }
        #expect(m.run(output) == "{1a}-#")
    }

    @Test func methodForm_andThreeTypedInputs() {
        let m = Marbles()
        #expect(m.run(m.input("1|").combineLatest(m.input("a|")).map { $0 + $1 }) == "{1a}|")
        let m2 = Marbles()
        let three = combineLatest(m2.input("1---|"), m2.input("-a|"), m2.input("--x|")).map { $0 + $1 + $2 }
        #expect(m2.run(three) == "--{1ax}-|")
    }
}

@Suite struct ZipMergeMarbleTests {
    @Test func zip_pairsInOrder_andCompletesWhenAnInputIsDoneAndEmpty() {
        // a:1, a:2, b:x, a:3, a:completed, b:y, b:z -> (1,x), (2,y), (3,z), completed; b cancelled
        let m = Marbles()
        let b = m.input("--x--yz----w|")
        #expect(m.run(zip(m.input("12-3|"), b).map { $0 + $1 }) == "--{1x}--{2y}({3z}|)")
        #expect(b.isCancelled)
    }

    @Test func zip_failure_arrayForm_andEmpty() {
        let m = Marbles()
        #expect(m.run(zip(m.input("1-#"), m.input("a-b|")).map { $0 + $1 }) == "{1a}-#")
        let m2 = Marbles()
        #expect(
            m2.run(Command.zip([m2.input("12|"), m2.input("ab|"), m2.input("xy|")]).map { $0.joined() })
                == "{1ax}{2by}|")
        let m3 = Marbles()
        #expect(m3.run(Command<String>.zip([]).map { $0.joined() }) == "|")
    }

    @Test func merge_passesValuesInArrivalOrder_completesWhenAllComplete() {
        // a:1, b:2, a:3, a:completed, b:4, b:completed -> 1, 2, 3, 4, completed
        let m = Marbles()
        #expect(m.run(m.input("1-3|").merge(m.input("-2--4|"))) == "123-4|")
    }

    @Test func merge_firstFailure_cancelsTheOthers_andEmptyCompletesAtOnce() {
        let m = Marbles()
        let other = m.input("-a---b|")
        #expect(m.run(Command.merge([m.input("--#"), other])) == "-a#")
        #expect(other.isCancelled)
        let m2 = Marbles()
        #expect(m2.run(Command<String>.merge([])) == "|")
    }
}

@Suite struct SequenceMarbleTests {
    @Test func then_ignoresTheFirstValues_andRunsTheNextAfterItCompleted() {
        // a:1, a:2, a:completed, then b: x, y, completed -> x, y, completed
        let m = Marbles()
        let b = m.input("xy|")
        let a = m.input("12|")
        #expect(m.run(a.then(b)) == "--xy|")
        #expect(b.dependencies.first === a)
    }

    @Test func then_firstFailing_failsTheNode_andTheNextNeverRuns() {
        let m = Marbles()
        let made = Locked(0)
        let output = m.input("1#").then { () -> Command<String> in
            made.withLock { $0 += 1 }
            return m.input("x|")
        }
        #expect(m.run(output) == "-#")
        #expect(made.withLock { $0 } == 0)
        let m2 = Marbles()
        let b = m2.input("x|")
        #expect(m2.run(m2.input("#").then(b)) == "#")
        #expect(b.state.isTerminal == false || b.isCancelled)
        #expect(b.isExecuting == false)
    }

    @Test func concat_runsEachAfterThePrevious() {
        let m = Marbles()
        #expect(m.run(m.input("1-|").concat(m.input("2|"), m.input("34|"))) == "1-234|")
        let m2 = Marbles()
        #expect(m2.run(m2.input("1#").concat(m2.input("2|"))) == "1#")
        let m3 = Marbles()
        #expect(m3.run(Command<String>.concat([])) == "|")
    }
}

@Suite struct FlatMapMarbleTests {
    @Test func flatMap_startsAnInnerPerValue_andCompletesWhenAllDid() {
        let m = Marbles()
        let output = m.input("ab|").flatMap { value in m.input(value.uppercased() + "|") }
        #expect(m.run(output) == "AB|")
    }

    @Test func flatMap_innerFailure_failsEverything() {
        let m = Marbles()
        let source = m.input("a--b|")
        let output = source.flatMap { _ in m.input("x-#") }
        #expect(m.run(output) == "x-#")
        #expect(source.isCancelled)
    }

    @Test func flatMap_maxConcurrent_queuesValuesWithoutDropping() {
        let m = Marbles()
        let output = m.input("abc|").flatMap(maxConcurrent: 1) { value in m.input(value + "-|") }
        #expect(m.run(output) == "a-b-c-|")
    }

    @Test func flatMap_nilMeansNoInner() {
        let m = Marbles()
        let output = m.input("abc|").flatMap { value in value == "b" ? nil : m.input(value + "|") }
        #expect(m.run(output) == "a-c|")
    }

    @Test func flatMapLatest_cancelsThePreviousInner() {
        let m = Marbles()
        let output = m.input("a-b|").flatMapLatest { value in m.input("-" + value + value.uppercased() + "|") }
        #expect(m.run(output) == "-a-bB|")
    }

    @Test func bind_chainsByTheLastValue_andRecoversFromErrors() {
        let m = Marbles()
        let chain = m.input("1|").bind { index, _, value, error in
            guard index < 2 else { return nil }
            if error != nil { return m.input("r|") }
            return index == 0 ? m.input("2#") : nil
        }
        #expect(m.run(chain) == "12r|")
        let m2 = Marbles()
        let unrecovered = m2.input("1#").bind { _, _, _, _ in nil }
        #expect(m2.run(unrecovered) == "1#")
    }

    @Test func catch_recoversWithTheReturnedCommand() {
        let m = Marbles()
        #expect(m.run(m.input("1#").catch { _ in m.input("x|") }) == "1x|")
        let m2 = Marbles()
        #expect(m2.run(m2.input("1#").catch { _ in m2.input("#") }) == "1#")
    }
}

@Suite struct TransformMarbleTests {
    @Test func map_filter_compactMap() {
        let m = Marbles()
        #expect(m.run(m.input("1-2|").map { $0 + $0 }) == "{11}-{22}|")
        let m2 = Marbles()
        #expect(m2.run(m2.input("1234|").filter { Int($0)! % 2 == 0 }) == "-2-4|")
        let m3 = Marbles()
        #expect(m3.run(m3.input("1a2|").compactMap { Int($0).map(String.init) }) == "1-2|")
    }

    @Test func throwingClosure_failsTheNode_andCancelsTheSource() {
        let m = Marbles()
        let source = m.input("1-2-3|")
        #expect(
            m.run(
                source.map { value -> String in
                    if value == "2" { throw Boom() }; return value
                }) == "1-#")
        #expect(source.isCancelled)
    }

    @Test func take_skip_takeLast() {
        let m = Marbles()
        let source = m.input("123-|")
        #expect(m.run(source.take(2)) == "1(2|)")
        #expect(source.isCancelled)  // take cancels its source after the n-th value
        let m2 = Marbles()
        #expect(m2.run(m2.input("123|").skip(1)) == "-23|")
        let m3 = Marbles()
        #expect(m3.run(m3.input("123|").takeLast(2)) == "---(23|)")
        let m4 = Marbles()
        #expect(m4.run(m4.input("12|").take(0)) == "|")
    }

    @Test func takeUntil_completesWhenTheTriggerSends() {
        let m = Marbles()
        #expect(m.run(m.input("1-2-3|").take(until: m.input("--t"))) == "1-|")
    }

    @Test func distinctUntilChanged_ignoreValues_handleEvents() {
        let m = Marbles()
        #expect(m.run(m.input("aabba|").distinctUntilChanged()) == "a-b-a|")
        let m2 = Marbles()
        #expect(m2.run(m2.input("12|").ignoreValues()) == "--|")
        let m3 = Marbles()
        let seen = Locked<[String]>([])
        let output = m3.input("12|").handleEvents(
            value: { value in seen.withLock { $0.append(value) } }, completed: { seen.withLock { $0.append("done") } })
        #expect(m3.run(output) == "12|")
        #expect(seen.withLock { $0 } == ["1", "2", "done"])
    }

    @Test func cancellingTheNode_cancelsItsInput() {
        let m = Marbles()
        let source = m.input("1-2-3-4|")
        #expect(m.run(source.map { $0 }, cancelAt: 3) == "1-2x")
        #expect(source.isCancelled)
    }
}

@Suite struct TimeMarbleTests {
    @Test func retry_runsAFreshAttemptUntilOneCompletes() {
        let m = Marbles()
        let scripts = Locked(["1#", "2#", "3|"])
        let output = Command<String>.retry(2, scheduler: m.scheduler) {
            m.input(scripts.withLock { $0.removeFirst() })
        }
        #expect(m.run(output) == "123|")
        let m2 = Marbles()
        #expect(m2.run(Command<String>.retry(0, scheduler: m2.scheduler) { m2.input("1#") }) == "1#")
    }

    @Test func retry_waitsTheDelayBetweenAttempts_andRefusesANegativeCount() {
        let m = Marbles()
        let output = Command<String>.retry(1, delay: .constant(m.tick * 2), scheduler: m.scheduler) { m.input("a#") }
        #expect(m.run(output) == "a--a#")
        let m2 = Marbles()
        #expect(m2.run(Command<String>.retry(-1, scheduler: m2.scheduler) { m2.input("a|") }) == "#")
    }

    /// Bad delays fail the retry at once with `invalidArgument` naming what is wrong (a negative
    /// initial delay with jitter, a NaN multiplier, ...), instead of trapping on a worker thread at
    /// the first failure; `delay(afterAttempt:)` itself never traps (an exponential that outgrows a
    /// `Duration` is capped).
    @Test func retry_refusesBadDelays_andDelaysNeverTrap() async {
        let bad: [RetryDelay] = [
            .exponential(initial: .milliseconds(-100), jitter: 0.5),
            .exponential(initial: .seconds(1), multiplier: .nan),
            .exponential(initial: .seconds(1), multiplier: -2),
            .exponential(initial: .seconds(1), maximum: .seconds(-1)),
            .exponential(initial: .seconds(1), jitter: .nan),
            .constant(.seconds(-1)),
        ]
        for delay in bad {
            let m = Marbles()
            let failure = Locked<CommandError?>(nil)
            let output = Command<String>.retry(2, delay: delay, scheduler: m.scheduler) { m.input("a#") }
            output.execute(on: .immediate) { event in
                if case .failed(let error) = event { failure.withLock { $0 = error as? CommandError } }
            }
            let error = failure.withLock { $0 }
            #expect(error?.code == .invalidArgument, "\(delay)")
            #expect(error?.message.contains("retry(2, delay:)") == true, "\(error?.message ?? "")")
            withExtendedLifetime(output) {}
        }
        let huge = RetryDelay.exponential(initial: .seconds(1), maximum: .seconds(Int64.max))
        #expect(huge.delay(afterAttempt: 40) == .seconds(1 << 39))
        #expect(huge.delay(afterAttempt: 5_000) == .seconds(Int64.max))
        #expect(RetryDelay.exponential(initial: .milliseconds(-100), jitter: 0.5).delay(afterAttempt: 1) == .zero)
        #expect(RetryDelay.exponential(initial: .seconds(1), multiplier: .nan).delay(afterAttempt: 3) == .seconds(60))
        #expect(RetryDelay.constant(.seconds(-1)).delay(afterAttempt: 1) == .zero)
        // A huge wait on the real clock is scheduled, not a trap, and cancelled with the retry.
        let attempts = Locked(0)
        let endless = Command<String>.retry(1, delay: .constant(.seconds(Int64.max))) {
            attempts.withLock { $0 += 1 }
            return Command<String> { result in result.fail(CommandError(code: .timedOut, command: "x", message: "x")) }
        }
        let cancelled = Checkpoint()
        endless.execute(on: .immediate) { if case .cancelled = $0 { cancelled.fulfill() } }
        endless.cancel()
        #expect(await cancelled.wait())
    }

    @Test func timeout_failsAtTheDeadline_andCancelsTheSource() {
        let m = Marbles()
        let source = m.input("--1--|")
        #expect(m.run(source.timeout(m.tick * 3, scheduler: m.scheduler)) == "--1#")
        #expect(source.isCancelled)
        let m2 = Marbles()
        #expect(m2.run(m2.input("1|").timeout(m2.tick * 3, scheduler: m2.scheduler)) == "1|")
        let m3 = Marbles()
        #expect(m3.run(m3.input("1|").timeout(.zero, scheduler: m3.scheduler)) == "#")
    }

    @Test func delay_shiftsEveryEvent_keepingOrder() {
        let m = Marbles()
        #expect(m.run(m.input("1-2|").delay(m.tick * 2, scheduler: m.scheduler)) == "--1-2|")
    }

    @Test func throttle_sendsAValueAfterQuiet_andFlushesOnCompletion() {
        let m = Marbles()
        #expect(m.run(m.input("ab---c|").throttle(m.tick * 2, scheduler: m.scheduler)) == "---b--(c|)")
    }

    @Test func interval_countsUntilTaken() {
        let m = Marbles()
        #expect(m.run(Command<Int>.interval(m.tick, scheduler: m.scheduler).take(3).map(String.init)) == "-01(2|)")
    }
}

@Suite struct SwitchToLatestMarbleTests {
    @Test func switchToLatest_followsTheNewestInner() {
        let m = Marbles()
        let inners = Locked(["-ab|", "-cd|"])
        let commands = m.input("x-y|").map { _ in m.input(inners.withLock { $0.removeFirst() }) }
        #expect(m.run(commands.switchToLatest()) == "-a-cd|")
    }
}
