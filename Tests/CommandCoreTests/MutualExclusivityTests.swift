import CommandTestSupport
import Dispatch
import Foundation
import Testing

@testable import CommandCore

/// Counts holders per category, as the commands themselves see it: a run that starts while another
/// command of its category runs is recorded as an overlap.
private final class Occupancy: Sendable {
    private struct State {
        var holders: [String: Int] = [:]
        var overlaps: [String] = []
        var order: [String] = []
    }
    // Guards the counts, the overlaps and the order of runs.
    private let state = Locked(State())
    /// Tests run in parallel and categories are process-wide: each test's categories are its own.
    private let tag = UUID().uuidString

    /// `name` as this test's category.
    func category(_ name: String) -> String { "\(name)@\(tag)" }

    func enter(_ categories: [String], name: String) {
        state.withLock { state in
            state.order.append(name)
            for category in categories {
                state.holders[category, default: 0] += 1
                if state.holders[category]! > 1 { state.overlaps.append("\(name) in \(category)") }
            }
        }
    }

    func leave(_ categories: [String]) {
        state.withLock { state in for category in categories { state.holders[category, default: 0] -= 1 } }
    }

    var overlaps: [String] { state.withLock { $0.overlaps } }
    var order: [String] { state.withLock { $0.order } }
}

/// A command in `categories` that records its run in `occupancy` and ends on another thread (or,
/// `atOnce`, inside its run).
private func exclusive(
    _ name: String, _ categories: [String], _ occupancy: Occupancy, atOnce: Bool = false
) -> Command<Int> {
    let command = Command<Int> { result in
        occupancy.enter(categories, name: name)
        if atOnce {
            occupancy.leave(categories)
            result.succeed(1)
            return nil
        }
        DispatchQueue.global().async {
            occupancy.leave(categories)
            result.succeed(1)
        }
        return nil
    }
    command.name = name
    for category in categories { command.add(condition: MutuallyExclusive(category: occupancy.category(category))) }
    return command
}

extension CommandState {
    fileprivate var isCompleted: Bool {
        if case .completed = self { return true }
        return false
    }
    fileprivate var isPending: Bool {
        if case .pending = self { return true }
        return false
    }
}

/// A command that takes `category` and keeps it until `release` is called (its run records itself
/// in `occupancy` when `records`); `holding` is fulfilled once it runs.
private final class Holder: Sendable {
    let holding = Checkpoint()
    private let result = Locked<CommandResult<Int>?>(nil)
    let command: Command<Int>

    init(_ category: String, _ occupancy: Occupancy, records: Bool) {
        let (result, holding) = (result, holding)
        command = Command<Int> { sink in
            if records { occupancy.enter([category], name: "holder") }
            result.withLock { $0 = sink }
            holding.fulfill()
            return nil
        }
        command.add(condition: MutuallyExclusive(category: occupancy.category(category)))
        command.execute(on: .immediate) { _ in }
    }

    func release() { result.withLock { $0 }?.succeed(0) }
}

private func ended<Output>(_ commands: [Command<Output>]) -> Checkpoint {
    let done = Checkpoint(count: commands.count)
    for command in commands {
        command.observeState(on: .immediate) { if $0.isTerminal { done.fulfill() } }
    }
    return done
}

/// ProcedureKit's `MutualExclusivityTests`, ported (a procedure is a command, `MutuallyExclusive<T>`
/// takes a category string; the case about `ProcedureQueue`'s internal lock API is not ported: this
/// library has no queue subclass), plus this library's own rules: all categories at once, FIFO,
/// leaving the line on cancel, and a load test.
@Suite struct MutualExclusivityTests {
    @Test func mutuallyExclusive_nameCategory_andEvaluatesTrue() async throws {
        let condition = MutuallyExclusive(category: "testing")
        #expect(condition.name == "MutuallyExclusive<testing>")
        #expect(condition.mutuallyExclusiveCategories == ["testing"])
        #expect(try await condition.evaluate(for: Command<Int>()))
    }

    /// Categories from `MutuallyExclusive` conditions (read without a set) and from a compound
    /// condition merge into one sorted list without repeats; every condition is kept, in order.
    @Test func categories_fromSeveralConditions_areSortedOnce_andEveryConditionIsKept() {
        let command = Command<Int>()
        command.add(condition: MutuallyExclusive(category: "c"))
        command.add(condition: MutuallyExclusive(category: "a"))
        command.add(condition: AndCondition([MutuallyExclusive(category: "d"), MutuallyExclusive(category: "b")]))
        command.add(condition: MutuallyExclusive(category: "a"))
        command.add(condition: MutuallyExclusive(category: "b"))
        #expect(command.mutuallyExclusiveCategories == ["a", "b", "c", "d"])
        #expect(command.conditions.map(\.name).first == "MutuallyExclusive<c>")
        #expect(command.conditions.count == 5)
    }

    @Test func mutuallyExclusiveCommands_canBeExecuted() async {
        let occupancy = Occupancy()
        let commands = [exclusive("one", ["alert"], occupancy), exclusive("two", ["alert"], occupancy)]
        let done = ended(commands)
        for command in commands { command.execute(on: .immediate) { _ in } }
        #expect(await done.wait())
        #expect(commands.allSatisfy { $0.state.isCompleted })
        #expect(occupancy.overlaps.isEmpty)
    }

    /// Three in one category on a wide queue of yours, added from several threads at once
    /// (ProcedureKit #543): never two at once.
    @Test func mutuallyExclusive_inAWideUserQueue_addedConcurrently_runOneAtATime() async {
        for _ in 0..<20 {
            let occupancy = Occupancy()
            let commands = (0..<3).map { exclusive("c\($0)", ["alert"], occupancy) }
            let done = ended(commands)
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 3
            for command in commands { DispatchQueue.global().async { queue.addOperation(command) } }
            #expect(await done.wait())
            #expect(occupancy.overlaps.isEmpty)
            #expect(occupancy.order.count == 3)
        }
    }

    /// Served in the order they became ready, per category.
    @Test func waiters_areServedFirstInFirstOut() async {
        let occupancy = Occupancy()
        let holder = Holder("file", occupancy, records: true)
        #expect(await holder.holding.wait())
        let waiters = (0..<20).map { exclusive("w\($0)", ["file"], occupancy) }
        let done = ended(waiters)
        for waiter in waiters {
            // One after the other, each waiting before the next is executed.
            waiter.execute(on: .immediate) { _ in }
        }
        occupancy.leave(["file"])
        holder.release()
        #expect(await done.wait())
        #expect(occupancy.order == ["holder"] + (0..<20).map { "w\($0)" })
        #expect(occupancy.overlaps.isEmpty)
    }

    /// `[a, b]` against `[b, a]` (a ProcedureKit deadlock): all categories are taken at once, so
    /// neither holds one while waiting for the other.
    @Test func twoCategoriesInOppositeOrders_neverDeadlock() async {
        for _ in 0..<200 {
            let occupancy = Occupancy()
            let commands = [
                exclusive("ab", ["a", "b"], occupancy), exclusive("ba", ["b", "a"], occupancy),
                exclusive("a", ["a"], occupancy), exclusive("b", ["b"], occupancy),
            ]
            let done = ended(commands)
            for command in commands { DispatchQueue.global().async { command.execute(on: .immediate) { _ in } } }
            #expect(await done.wait(seconds: 30))
            #expect(occupancy.overlaps.isEmpty)
        }
    }

    /// A condition's dependency in the command's own category (a ProcedureKit deadlock): the
    /// dependency runs before the command asks for the category, so both finish.
    @Test func conditionDependencyInTheSameCategory_finishes() async {
        let occupancy = Occupancy()
        let signIn = exclusive("sign in", ["alert"], occupancy)
        let command = exclusive("show", ["alert"], occupancy)
        struct SignedIn: CommandCondition {
            let signIn: Operation
            func dependency(for command: Operation) -> Operation? { signIn }
            func evaluate(for command: Operation) async throws -> Bool { true }
        }
        command.add(condition: SignedIn(signIn: signIn))
        let done = ended([command, signIn])
        command.execute(on: .immediate) { _ in }
        #expect(await done.wait(seconds: 30))
        #expect(occupancy.order == ["sign in", "show"])
        #expect(command.state.isCompleted)
    }

    /// Cancelled while waiting for a category: it leaves the line at once and ends cancelled; the
    /// next waiter is served when the holder ends.
    @Test func cancelledWhileWaiting_leavesTheLine() async {
        let occupancy = Occupancy()
        let holder = Holder("file", occupancy, records: false)
        #expect(await holder.holding.wait())
        let cancelled = exclusive("cancelled", ["file"], occupancy)
        let next = exclusive("next", ["file"], occupancy)
        let cancelledEnded = ended([cancelled])
        let nextEnded = ended([next])
        cancelled.execute(on: .immediate) { _ in }
        next.execute(on: .immediate) { _ in }
        cancelled.cancel()
        #expect(await cancelledEnded.wait())
        if case .cancelled = cancelled.state {} else { Issue.record("\(cancelled.state)") }
        #expect(next.state.isPending)
        holder.release()
        #expect(await nextEnded.wait())
        #expect(occupancy.order == ["next"])
    }

    /// In a serial queue of yours, a command waiting for a category is not ready, so the queue runs
    /// other work meanwhile; it runs once the holder ended.
    @Test func waitingForACategory_inASerialUserQueue_isNotReady_andDoesNotHoldTheQueue() async {
        let occupancy = Occupancy()
        let holder = Holder("file", occupancy, records: false)
        #expect(await holder.holding.wait())
        let waiting = exclusive("waiting", ["file"], occupancy)
        let waitingEnded = ended([waiting])
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.addOperation(waiting)
        let other = Checkpoint()
        queue.addOperation { other.fulfill() }
        #expect(await other.wait())
        #expect(!waiting.isReady)
        #expect(waiting.state.isPending)
        holder.release()
        #expect(await waitingEnded.wait())
        #expect(waiting.state.isCompleted)
        #expect(occupancy.order == ["waiting"])
    }

    /// A run that fails, throws away its result or is cancelled while running releases its
    /// categories: the next command of the category runs.
    @Test func everyEnding_releasesTheCategories() async {
        struct Boom: Error {}
        let occupancy = Occupancy()
        let failing = Command<Int> { result in
            result.fail(Boom())
            return nil
        }
        let abandoning = Command<Int> { _ in nil }
        let running = Locked<CommandResult<Int>?>(nil)
        let started = Checkpoint()
        let cancelledWhileRunning = Command<Int> { result in
            running.withLock { $0 = result }
            started.fulfill()
            return nil
        }
        for command in [failing, abandoning, cancelledWhileRunning] {
            command.add(condition: MutuallyExclusive(category: occupancy.category("release")))
        }
        let first = ended([failing, abandoning])
        failing.execute(on: .immediate) { _ in }
        abandoning.execute(on: .immediate) { _ in }
        #expect(await first.wait())
        cancelledWhileRunning.execute(on: .immediate) { _ in }
        #expect(await started.wait())
        cancelledWhileRunning.cancel()
        let last = exclusive("last", ["release"], occupancy)
        let lastEnded = ended([last])
        last.execute(on: .immediate) { _ in }
        #expect(await lastEnded.wait())
        #expect(last.state.isCompleted)
    }

    /// 10,000 commands in 8 categories, 1-3 each, executed from 4 threads and through two queues of
    /// yours, random cancels: never two holders of a category at once, every command ends once.
    /// (1,000 under the sanitizers: see `StressScale.isSanitized`.)
    @Test func load_tenThousandCommands_eightCategories_neverOverlap() async {
        let count = StressScale.pick(short: 10_000, long: 100_000, sanitized: 1_000)
        var random = SeededRandom(seed: 42)
        let occupancy = Occupancy()
        let categories = (0..<8).map { "k\($0)" }
        var commands: [Command<Int>] = []
        for index in 0..<count {
            let picked = Array(categories.shuffled(using: &random).prefix(Int.random(in: 1...3, using: &random)))
            commands.append(exclusive("n\(index)", picked, occupancy, atOnce: true))
        }
        let endings = Locked([Int](repeating: 0, count: count))
        let done = Checkpoint(count: count)
        for (index, command) in commands.enumerated() {
            command.observeState(on: .immediate) { state in
                guard state.isTerminal else { return }
                endings.withLock { $0[index] += 1 }
                done.fulfill()
            }
        }
        let queues = (0..<2).map { _ in OperationQueue() }
        queues[1].maxConcurrentOperationCount = 4
        let cancels = (0..<count).filter { _ in Int.random(in: 0..<20, using: &random) == 0 }
        let viaQueue = Set((0..<count).filter { $0 % 5 == 0 })
        let batches = stride(from: 0, to: count, by: count / 4).map { Array($0..<min($0 + count / 4, count)) }
        for batch in batches {
            let batchCommands = batch.map { commands[$0] }
            let batchViaQueue = batch.map { viaQueue.contains($0) }
            Thread {
                for (offset, command) in batchCommands.enumerated() {
                    if batchViaQueue[offset] {
                        queues[offset % 2].addOperation(command)
                    } else {
                        command.execute(on: .immediate) { _ in }
                    }
                }
            }.start()
        }
        let toCancel = cancels.map { commands[$0] }
        DispatchQueue.global().async { for command in toCancel { command.cancel() } }
        #expect(await done.wait(seconds: 300))
        #expect(occupancy.overlaps.isEmpty, "\(occupancy.overlaps.prefix(5))")
        #expect(endings.withLock { $0 }.allSatisfy { $0 == 1 })
    }
}

/// The book of holds and waiters as a value.
@Suite struct ExclusivityBookTests {
    private func key(_ category: String) -> ExclusivityBook.Key { .init(category: category, scope: nil) }

    @Test func grantsAllOrNothing_firstInFirstOutPerCategory() {
        var book = ExclusivityBook()
        let a = book.request([key("a")], name: "a", now: 0)
        #expect(a.granted)
        let ab = book.request([key("a"), key("b")], name: "ab", now: 0)
        #expect(!ab.granted)  // a is held: b is not taken meanwhile
        let b = book.request([key("b")], name: "b", now: 0)
        #expect(!b.granted)  // b is wanted by an earlier waiter
        let c = book.request([key("c")], name: "c", now: 0)
        #expect(c.granted)  // nobody wants c
        #expect(book.leave(a.ticket, now: 1) == [ab.ticket])
        #expect(book.holder(of: key("b"))?.name == "ab")
        #expect(book.leave(ab.ticket, now: 2) == [b.ticket])
    }

    @Test func leavingTheLine_grantsWhoWasBehind() {
        var book = ExclusivityBook()
        let holder = book.request([key("a")], name: "holder", now: 0)
        let blocked = book.request([key("a"), key("b")], name: "blocked", now: 0)
        let behind = book.request([key("b")], name: "behind", now: 0)
        #expect(!behind.granted)
        #expect(book.leave(blocked.ticket, now: 1) == [behind.ticket])
        #expect(book.isWaiting(blocked.ticket) == false)
        #expect(book.leave(holder.ticket, now: 2).isEmpty)
    }

    /// A ticket names its request only while the request lives: leaving it again, after its record
    /// went to a newer request, releases nothing of the newer one's.
    @Test func aTicketLeftTwice_releasesNothingOfTheRequestThatReusedItsRecord() {
        var book = ExclusivityBook()
        let first = book.request([key("a")], name: "first", now: 0)
        #expect(first.granted && book.leave(first.ticket, now: 1).isEmpty)
        let second = book.request([key("a")], name: "second", now: 2)  // takes the record `first` had
        let waiter = book.request([key("a")], name: "waiter", now: 3)
        #expect(second.granted && !waiter.granted && second.ticket != first.ticket)
        #expect(book.leave(first.ticket, now: 4).isEmpty)
        #expect(book.holder(of: key("a"))?.name == "second" && book.isWaiting(waiter.ticket))
        #expect(!book.isWaiting(first.ticket) && book.waitingCount == 1)
        #expect(book.leave(second.ticket, now: 5) == [waiter.ticket])
        #expect(book.leave(99, now: 6).isEmpty)  // never made
    }

    /// A long line, with requests leaving from its middle (holes) and the front compacted: grants stay
    /// first in, first out.
    @Test func longLine_withHoles_staysFirstInFirstOut() {
        var book = ExclusivityBook()
        let holder = book.request([key("a")], name: "holder", now: 0)
        let waiting = (0..<300).map { book.request([key("a")], name: "w\($0)", now: 0).ticket }
        for ticket in waiting where ticket % 3 == 0 { _ = book.leave(ticket, now: 0) }  // holes
        var order: [UInt64] = []
        var current = holder.ticket
        while true {
            let granted = book.leave(current, now: 0)
            guard let next = granted.first else { break }
            #expect(granted.count == 1)
            order.append(next)
            current = next
        }
        #expect(order == waiting.filter { $0 % 3 != 0 })
        #expect(book.waitingCount == 0)
    }

    /// Requests for 1 to 3 of 8 categories, released one at a time in a random order: never two
    /// holders of one category, each category's requests granted in their arrival order, every
    /// request granted in the end; and the keys' numbers are given back (a process that names
    /// categories without end keeps a bounded book).
    @Test func manyRequestsForSomeOf8Categories_grantFirstInFirstOutPerCategory_andGiveTheirKeysBack() {
        var book = ExclusivityBook()
        var random = SystemRandomNumberGenerator()
        let names = (0..<8).map { "c\($0)" }
        var keysOf: [UInt64: [String]] = [:]
        var arrivals: [String: [UInt64]] = [:]
        var holding: Set<UInt64> = []
        for index in 0..<400 {
            let categories = (0...(index % 3)).map { names[(index + $0 * 3) % 8] }
            let request = book.request(categories.map(key), name: "r\(index)", now: 0)
            keysOf[request.ticket] = categories
            for category in categories { arrivals[category, default: []].append(request.ticket) }
            if request.granted { holding.insert(request.ticket) }
        }
        var grantedOrder: [String: [UInt64]] = [:]
        for ticket in holding.sorted() {
            for category in keysOf[ticket]! { grantedOrder[category, default: []].append(ticket) }
        }
        while let leaving = holding.randomElement(using: &random) {
            holding.remove(leaving)
            for granted in book.leave(leaving, now: 0) {
                for category in keysOf[granted]! {
                    #expect(!holding.contains { keysOf[$0]!.contains(category) }, "\(category) held twice")
                    grantedOrder[category, default: []].append(granted)
                }
                holding.insert(granted)
            }
        }
        #expect(book.waitingCount == 0)
        for category in names { #expect(grantedOrder[category] == arrivals[category], "\(category) in arrival order") }
        #expect(book.keysInUse == 0)
        // Categories without end: each named once; the book keeps numbers for a bounded few.
        for index in 0..<10_000 {
            let request = book.request([key("once-\(index)")], name: "once", now: 0)
            #expect(request.granted)
            _ = book.leave(request.ticket, now: 0)
        }
        #expect(book.keysInUse == 0 && book.keysNumbered <= 130, "\(book.keysNumbered) numbers kept")
    }

    @Test func scopes_keepAGroupsChildrenApartFromOtherHolders() {
        var book = ExclusivityBook()
        let group = ObjectIdentifier(NSObject())
        let parent = book.request([key("a")], name: "group", now: 0)
        #expect(parent.granted)
        let child = book.request([.init(category: "a", scope: group)], name: "child", now: 0)
        #expect(child.granted)
        let sibling = book.request([.init(category: "a", scope: group)], name: "sibling", now: 0)
        #expect(!sibling.granted)
        #expect(book.leave(child.ticket, now: 1) == [sibling.ticket])
    }

    /// The release by an ending (`lane`) hands the lane to the first request it grants only; the
    /// others, and a release that is not an ending, go through admission. Waiters are told outside
    /// the book's lock, in the book's order; a request granted at once tells nobody.
    @Test func aReleaseByAnEnding_givesItsLaneToTheFirstGrantedOnly() {
        // Categories of this test's own: the process-wide book is shared with the other tests.
        let unique = UUID().uuidString
        let x = key("x-\(unique)"), y = key("y-\(unique)")
        let log = Log()
        let holder = Exclusivity.request([x, y], label: .init("holder"), waiter: LaneWaiter("holder", log))
        #expect(holder.granted)
        let first = Exclusivity.request([x], label: .init("first"), waiter: LaneWaiter("first", log))
        let second = Exclusivity.request([y], label: .init("second"), waiter: LaneWaiter("second", log))
        #expect(!first.granted && !second.granted && log.all.isEmpty)
        Exclusivity.leave(holder.ticket, lane: true)
        #expect(log.all == ["first lane", "second"])
        let third = Exclusivity.request([x], label: .init("third"), waiter: LaneWaiter("third", log))
        Exclusivity.leave(first.ticket)
        #expect(log.all == ["first lane", "second", "third"])
        Exclusivity.leave(second.ticket)
        Exclusivity.leave(third.ticket)
        #expect(Exclusivity.holder(of: x) == nil && Exclusivity.holder(of: y) == nil)
    }
}

/// Records when its request is granted, and whether with the releasing lane.
private final class LaneWaiter: ExclusivityWaiter {
    let name: String
    let log: Log
    init(_ name: String, _ log: Log) {
        self.name = name
        self.log = log
    }
    func categoriesGranted(_ ticket: UInt64, lane: Bool) { log.append(lane ? "\(name) lane" : name) }
}
