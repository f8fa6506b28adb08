import CommandGraph
import CommandTestSupport
import Dispatch
import Foundation
import Testing

/// A child in a category an ancestor group holds runs inside the nearest holding ancestor's hold,
/// however far up it is, whether or not the groups in between hold the category: every shape up to
/// three levels of groups, leaves in one or two categories, and a child added while its group runs.
@Suite struct NestedExclusivityTests {
    /// Counts how many leaves run at once.
    private final class Overlap: Sendable {
        private let running = Locked((now: 0, most: 0))
        func enter() {
            running.withLock {
                $0.now += 1
                $0.most = max($0.most, $0.now)
            }
        }
        func leave() { running.withLock { $0.now -= 1 } }
        var most: Int { running.withLock { $0.most } }
    }

    private func leaf(_ name: String, categories: [String], overlap: Overlap) -> Command<Int> {
        let command = Command<Int> { result in
            overlap.enter()
            DispatchQueue.global().async {
                overlap.leave()
                result.succeed(1)
            }
            return nil
        }
        command.name = name
        for category in categories { command.add(condition: MutuallyExclusive(category: category)) }
        return command
    }

    private func ended(_ command: GroupCommand) async -> CommandState {
        await withCheckedContinuation { continuation in
            let once = OnceToken()
            command.observeState(on: .immediate) { state in
                if state.isTerminal, once.take() { continuation.resume(returning: state) }
            }
            command.execute(on: .immediate) { _ in }
        }
    }

    /// Levels outer > middle > inner > two leaves; each group holds the category or not (8 shapes),
    /// leaves in the category alone or with a second one. Each shape ends completed, and the two
    /// leaves never overlap.
    @Test(arguments: [false, true])
    func everyShapeToThreeLevels_completes_leavesStayExclusive(twoCategories: Bool) async {
        for holds in 0..<8 {
            let db = "db-\(UUID().uuidString)"
            let net = "net-\(UUID().uuidString)"
            let overlap = Overlap()
            let categories = twoCategories ? [db, net] : [db]
            let leaves = (0..<2).map { leaf("leaf\($0)", categories: categories, overlap: overlap) }
            let inner = GroupCommand(name: "inner", children: leaves)
            let middle = GroupCommand(name: "middle", children: [inner])
            let outer = GroupCommand(name: "outer", children: [middle])
            for (bit, group) in [outer, middle, inner].enumerated() where holds & (1 << bit) != 0 {
                group.add(condition: MutuallyExclusive(category: db))
            }
            let state = await ended(outer)
            #expect("\(state)" == "completed", "holders \(holds), two categories: \(twoCategories)")
            #expect(overlap.most == 1, "holders \(holds)")
        }
    }

    /// The snippet as written (a leaf under a group that does not hold 'db', under one that
    /// does), two levels.
    @Test func grandchild_inItsGrandparentsCategory_runs() async {
        let db = "db-\(UUID().uuidString)"
        let leaf = Command<Int> { r in
            r.succeed(1); return nil
        }
        leaf.add(condition: MutuallyExclusive(category: db))
        let inner = GroupCommand(name: "inner", children: [leaf])
        let outer = GroupCommand(name: "outer", children: [inner])
        outer.add(condition: MutuallyExclusive(category: db))
        let events = Locked<[String]>([])
        let done = Checkpoint()
        outer.execute(on: .immediate) { event in
            events.withLock { $0.append("\(event)") }
            if event.isTerminal { done.fulfill() }
        }
        #expect(await done.wait())
        #expect(events.withLock { $0 }.last == "completed")
    }

    /// A group added to a running holder, with a leaf in the category, and a leaf added to that
    /// group while it runs: both run inside the outer hold.
    @Test func childrenAddedWhileRunning_runInsideTheHold() async {
        let db = "db-\(UUID().uuidString)"
        let overlap = Overlap()
        let lateLeaf = leaf("late leaf", categories: [db], overlap: overlap)
        let inner = GroupCommand(name: "inner", children: [leaf("first leaf", categories: [db], overlap: overlap)])
        let adder = Command<Int> { result in
            inner.add(child: lateLeaf)
            result.succeed(0)
            return nil
        }
        inner.add(child: adder)
        let outer = GroupCommand(name: "outer")
        outer.add(condition: MutuallyExclusive(category: db))
        let joiner = Command<Int> { result in
            outer.add(child: inner)
            result.succeed(0)
            return nil
        }
        outer.add(child: joiner)
        let state = await ended(outer)
        #expect("\(state)" == "completed")
        #expect(lateLeaf.isFinished)
        #expect(overlap.most == 1)
    }

    /// Outside the group, a command in the category waits for the whole outer group (its hold is
    /// process-wide): a leaf's scoped hold never lets an outsider in.
    @Test func outsider_waitsForTheWholeHold() async {
        let db = "db-\(UUID().uuidString)"
        let overlap = Overlap()
        let inner = GroupCommand(name: "inner", children: [leaf("leaf", categories: [db], overlap: overlap)])
        let outer = GroupCommand(name: "outer", children: [inner])
        outer.add(condition: MutuallyExclusive(category: db))
        let outsider = leaf("outsider", categories: [db], overlap: overlap)
        let finishedFirst = Locked<[String]>([])
        let both = Checkpoint(count: 2)
        for (name, command) in [("outer", outer as Operation), ("outsider", outsider)] {
            (command as? GroupCommand)?.observeState(on: .immediate) { state in
                if state.isTerminal {
                    finishedFirst.withLock { $0.append(name) }
                    both.fulfill()
                }
            }
            (command as? Command<Int>)?.observeState(on: .immediate) { state in
                if state.isTerminal {
                    finishedFirst.withLock { $0.append(name) }
                    both.fulfill()
                }
            }
        }
        outer.execute(on: .immediate) { _ in }
        outsider.execute(on: .immediate) { _ in }
        #expect(await both.wait())
        #expect(overlap.most == 1)
    }
}
