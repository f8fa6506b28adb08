import CommandTestSupport
import Foundation
import Testing

@testable import CommandCore

/// A command that says when it is released.
final class Tracked: Command<Int>, @unchecked Sendable {
    // Immutable after init.
    let released: Checkpoint
    let behaviour: Behaviour

    enum Behaviour {
        case succeed, fail, never
    }

    init(_ behaviour: Behaviour, released: Checkpoint) {
        self.behaviour = behaviour
        self.released = released
        super.init()
    }

    override func run(_ result: CommandResult<Int>) -> (any Cancelable)? {
        switch behaviour {
        case .succeed:
            result.succeed(1)
            return nil
        case .fail:
            result.fail(CocoaError(.featureUnsupported))
            return nil
        case .never:
            return BlockCancelable { _ = result }  // holds the result until cancelled
        }
    }

    deinit { released.fulfill() }
}

/// After a graph ended (completed, failed or cancelled) and the caller dropped it, every command is
/// released: no cycle between a command, its queue, its observers and its cancelables survives.
@Suite struct LeakTests {
    @Test func chain_completed_releasesEveryCommand() async {
        let released = Checkpoint(count: 200)
        do {
            let commands = (0..<200).map { _ in Tracked(.succeed, released: released) }
            for index in 1..<200 { commands[index].addDependency(commands[index - 1]) }
            let recorder = Recorder<Int>()
            commands[199].execute(on: .queue(DispatchQueue(label: "leak")), recorder.handler)
            #expect(await recorder.waitForTerminal())
        }
        #expect(await released.wait())
    }

    @Test func diamond_failed_releasesEveryCommand() async {
        let released = Checkpoint(count: 4)
        do {
            let top = Tracked(.fail, released: released)
            let left = Tracked(.succeed, released: released)
            let right = Tracked(.succeed, released: released)
            let bottom = Tracked(.succeed, released: released)
            left.addDependency(top)
            right.addDependency(top)
            bottom.addDependency(left)
            bottom.addDependency(right)
            let recorder = Recorder<Int>()
            bottom.execute(recorder.handler)
            #expect(await recorder.waitForTerminal())
            #expect(recorder.terminal?.commandError?.code == .dependencyCancelled)
        }
        #expect(await released.wait())
    }

    @Test func neverCompleting_cancelledMidRun_releasesEverything() async {
        let released = Checkpoint(count: 3)
        do {
            let first = Tracked(.never, released: released)
            let second = Tracked(.succeed, released: released)
            let third = Tracked(.succeed, released: released)
            second.addDependency(first)
            third.addDependency(second)
            let recorder = Recorder<Int>()
            let bag = CancelBag()
            third.execute(recorder.handler).store(in: bag)
            first.observeState(on: .immediate) { state in
                if case .executing = state { first.cancel() }
            }
            #expect(await recorder.waitForTerminal())
        }
        #expect(await released.wait())
    }

    @Test func pendingGraph_neverExecuted_isReleased() async {
        let released = Checkpoint(count: 3)
        do {
            let a = Tracked(.succeed, released: released)
            let b = Tracked(.succeed, released: released)
            let c = Tracked(.succeed, released: released)
            b.addDependency(a)
            c.addDependency(b)
            c.addDependency(a)
        }
        #expect(await released.wait())
    }
}
