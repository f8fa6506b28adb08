import Foundation
import Testing

@testable import CommandCore

/// The size of a command's state, which every node of a graph carries (the goal: at most 1 KiB per
/// live node at a million nodes, of which Foundation's own `Operation` is about 550 bytes on Linux).
@Suite struct StateLayoutTests {
    @Test func aCommandsStateStaysSmall() {
        // 736 bytes before `CommandError` was boxed, the timing stored without optionals and the
        // narrow fields packed together; 376 after; 304 with the rarely set fields in a box; 312 with
        // the first dependency inline, 328 with the first dependent inline (each saves a 40-to-48-byte
        // array for most commands); 312 once the state stopped being generic (the run's closure, 16
        // bytes, moved to the command object: the same bytes a command, no metadata look-ups); 296 with
        // the admission slot in one byte and the consumer count in the padding after the face: the
        // lock's allocation (state, mutex, header) went from a 384-byte to a 368-byte block.
        // 288 with a command's neighbours as 8-byte `CommandNode` references (a 352-byte block); a
        // 320-byte block since the lock beside the state is 8 bytes (a futex lock) instead of a
        // 40-byte `pthread_mutex_t`. 272 without the command's drain function for `.immediate`
        // observers (the trampoline holds the command itself): a 304-byte block. 256 with the run's
        // cancelable kept as its object (8 bytes, not a 16-byte existential), the thread `run` ran on as
        // a 4-byte number and the consumer count after it, in the timing's last word, and the face's
        // flags in one word: a 288-byte block (16 + 256 + the 8-byte lock = 280 bytes asked for); a
        // 272-byte block since the lock and the state are an allocation with no object header
        // (`OwnedLocked`: 8 + 256 = 264 asked for).
        #expect(MemoryLayout<CommandStateMachine>.size <= 256, "\(MemoryLayout<CommandStateMachine>.size)")
        #expect(MemoryLayout<OperationFace>.size <= 32, "\(MemoryLayout<OperationFace>.size)")
        #expect(MemoryLayout<CommandTiming>.size <= 36, "\(MemoryLayout<CommandTiming>.size)")
        #expect(MemoryLayout<LockWord>.size <= 8, "the lock beside the state")
        // An observer's record: 64 bytes while a context kept a run loop's mode inline (25 bytes);
        // one observer's array is then a 96-byte block instead of a 112-byte one, and 64 bytes since
        // the records are an `ObserverList` (no array header: the count in the first record's padding).
        #expect(MemoryLayout<CallbackContext>.size <= 8)
        #expect(MemoryLayout<ObserverRecord>.stride <= 40, "\(MemoryLayout<ObserverRecord>.stride)")
    }

    /// The rarely set fields cost nothing until one is set: a life without conditions, progress or a
    /// misuse never makes their box (not even the ending's `gate?.end()`, which would be one more
    /// allocation per command).
    @Test func aPlainLife_makesNoBoxOfRareFields() {
        var machine = CommandStateMachine()
        _ = machine.send(1)
        _ = machine.terminate(.completed)
        #expect(machine.gate == nil && machine.misuse == nil && machine.runTimeLinks.isEmpty)
        #expect(!machine.hasRareFields)
        var copy = machine
        copy.misuse = .cancelled("x")
        #expect(copy.hasRareFields && copy.misuse?.code == .cancelled)
        #expect(!machine.hasRareFields && machine.misuse == nil, "a copy's write is its own")
        var shared = copy
        shared.misuse = nil
        #expect(copy.misuse?.code == .cancelled && shared.misuse == nil, "copied on write when shared")
    }

    @Test func operationList_keepsOrder_membership_andRemoval() {
        let operations = (0..<4).map { _ in Operation() }
        var list = OperationList()
        #expect(list.isEmpty && list.count == 0 && list.array.isEmpty)
        list.append(operations[0])
        #expect(list.count == 1 && list[0] === operations[0] && list.contains(operations[0]))
        #expect(!list.contains(operations[1]))
        for operation in operations.dropFirst() { list.append(operation) }
        #expect(list.count == 4 && zip(list, operations).allSatisfy { $0 === $1 })
        list.remove(operations[0])
        #expect(list.count == 3 && list[0] === operations[1] && !list.contains(operations[0]))
        list.remove(operations[2])
        #expect(list.array.count == 2 && list[0] === operations[1] && list[1] === operations[3])
    }

    /// A list's tail keeps no count (its slots are filled from the start; the count is the first nil)
    /// and no room (the allocator's block size): every length up to past several growths reads back in
    /// order, a copy is not changed by an append to the original (copy on write), and dropping the
    /// list releases every element.
    @Test func edgeList_countsAndCopiesOnWrite_atEveryLength() {
        let operations = (0..<200).map { _ in Operation() }
        var list = OperationList()
        var copies: [OperationList] = []
        for (length, operation) in operations.enumerated() {
            copies.append(list)
            list.append(operation)
            #expect(list.count == length + 1 && list[length] === operation)
        }
        #expect(Array(list).count == 200 && zip(list, operations).allSatisfy { $0 === $1 })
        #expect(list.array.count == 200 && list.rest.count == 199)
        for (length, copy) in copies.enumerated() {
            #expect(copy.count == length && zip(copy, operations).allSatisfy { $0 === $1 }, "copy \(length)")
        }
        // An append to a copy that shares its tail with `list` leaves `list` alone.
        var branch = copies[10]
        branch.append(operations[199])
        #expect(branch.count == 11 && branch[10] === operations[199] && list[10] === operations[10])

        weak var released: Operation?
        do {
            var owner = OperationList()
            for _ in 0..<9 {
                let operation = Operation()
                released = operation
                owner.append(operation)
            }
            #expect(released != nil && owner.count == 9)
        }
        #expect(released == nil, "the tail released its elements")
    }

    /// A command's observer records (`ObserverList`, no array header: the count in the first record):
    /// against an array doing the same appends and removals at every position, with copies kept (each
    /// keeps its own records: copy on write), a whole record written over the first (the count stays),
    /// one record's block 64 bytes, and the sinks released with the list.
    @Test func observerList_matchesAnArray_copiesOnWrite_andReleasesItsSinks() {
        final class Sink: Sendable {}
        func record(_ id: UInt64) -> ObserverRecord {
            ObserverRecord(id: id, context: .immediate, kind: .events, sink: Sink(), cursor: Int(id))
        }
        var list = ObserverList()
        var model: [UInt64] = []
        var copies: [(ObserverList, [UInt64])] = []
        var random: UInt64 = 0x9E37_79B9_7F4A_7C15
        for step in 0..<600 {
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let roll = Int(random >> 33)
            if model.isEmpty || roll % 3 != 0 {
                list.append(record(UInt64(step)))
                model.append(UInt64(step))
            } else {
                let index = roll % model.count
                list.remove(at: index)
                model.remove(at: index)
            }
            if step % 37 == 0 { copies.append((list, model)) }
            #expect(list.count == model.count && list.isEmpty == model.isEmpty)
            #expect((0..<list.count).map { list[$0].id } == model, "step \(step)")
        }
        for (copy, expected) in copies {
            #expect((0..<copy.count).map { copy[$0].id } == expected && copy.count == expected.count)
        }
        // A write through a copy that shares the buffer leaves the original alone.
        var branch = list
        branch[0].cursor = -1
        #expect(branch[0].cursor == -1 && list[0].cursor != -1)
        branch[0] = record(9_999)
        #expect(branch.count == list.count && branch[0].id == 9_999, "a whole first record keeps the count")
        branch.setFirstCursorUnshared(-2)
        #expect(branch[0].cursor == -2 && list[0].cursor != -2)

        var one = ObserverList()
        one.append(record(1))
        #expect(one.onlyRecord?.pointee.id == 1)
        // Room for one record: 16 + 40 bytes asked for (a 64-byte block), not the 80-byte array.
        #expect(one.withBufferForTesting { $0.capacity } == 1)
        one.append(record(2))
        #expect(one.onlyRecord == nil && one.count == 2)

        weak var released: AnyObject?
        do {
            var owner = ObserverList()
            for id in 0..<5 {
                let sink = Sink()
                released = sink
                owner.append(ObserverRecord(id: UInt64(id), context: .immediate, kind: .events, sink: sink, cursor: 0))
            }
            #expect(released != nil && owner.count == 5)
            owner.remove(at: 0)
            #expect(released != nil, "the last sink is still held")
        }
        #expect(released == nil, "the buffer released its records' sinks")
    }

    @Test func anErrorIsOneReferenceWide() {
        #expect(MemoryLayout<CommandError>.size == MemoryLayout<AnyObject>.size)
        #expect(MemoryLayout<Termination>.size <= 9)
        let error = CommandError.dependencyFailed("b", dependency: "a", error: CommandError.cancelled("a"))
        #expect(error.code == .dependencyFailed)
        #expect(error.command == "b" && error.dependency == "a")
        #expect((error.underlying as? CommandError)?.code == .cancelled)
        #expect(error.message.contains("'b' did not run because its dependency 'a' failed"))
    }

    /// The thread a command ran on is recorded as a 4-byte number: the same on one thread, another on
    /// another thread (a new thread is never given a number an earlier one had).
    @Test func aThreadsNumberNamesItAlone() async {
        let here = CommandTiming.currentThread
        #expect(here != 0 && CommandTiming.currentThread == here)
        let there = await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: CommandTiming.currentThread) }.start()
        }
        #expect(there != 0 && there != here)
        var timing = CommandTiming()
        timing.threadID = there
        #expect(timing.threadID == there)
    }

    @Test func timingReadsNilUntilRecorded() {
        var timing = CommandTiming()
        #expect(timing.startedAt == nil && timing.endedAt == nil && timing.threadID == nil)
        timing.startedAt = 5
        timing.endedAt = 12
        #expect(timing.startedAt == 5 && timing.runDuration == .nanoseconds(7))
        timing.startedAt = nil
        #expect(timing.startedAt == nil && timing.runDuration == nil)
    }
}
