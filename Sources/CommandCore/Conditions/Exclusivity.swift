import Dispatch

/// Who holds which mutually exclusive category, and who waits: a value type, tested without threads.
///
/// A request names every category its command needs and is granted all of them at once, never some
/// (so two commands in `[a, b]` and `[b, a]` cannot each hold one and wait for the other). Requests
/// are served first in, first out per category: a request is granted when none of its categories is
/// held and no earlier request still waiting needs one of them (a later request for other categories
/// may pass a waiting one; it never passes a request it shares a category with).
///
/// Categories are scoped: a command that runs inside a group holding category `c` asks for `c`
/// within that group (``ExclusivityBook/Key/scope``), so it is exclusive with its siblings in `c`, not
/// with the group that holds `c` for all of them.
struct ExclusivityBook: Sendable {
    /// A category within a scope (the group that holds it, or the whole process).
    ///
    /// Its hash is computed once, when it is made: the book looks a key up about ten times a command
    /// (held, wanted, the walk), and hashing the category's text each time cost about a tenth of an
    /// exclusive command (callgrind).
    struct Key: Hashable, Sendable, Comparable {
        let category: String
        /// The group whose hold the request runs inside, or nil: the process.
        let scope: ObjectIdentifier?
        private let hash: Int

        init(category: String, scope: ObjectIdentifier?) {
            self.category = category
            self.scope = scope
            var hasher = Hasher()
            hasher.combine(category)
            hasher.combine(scope)
            hash = hasher.finalize()
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.hash == rhs.hash && lhs.scope == rhs.scope && lhs.category == rhs.category
        }

        func hash(into hasher: inout Hasher) { hasher.combine(hash) }

        static func < (lhs: Key, rhs: Key) -> Bool {
            if lhs.category != rhs.category { return lhs.category < rhs.category }
            return (lhs.scope.map { UInt(bitPattern: $0.hashValue) } ?? 0)
                < (rhs.scope.map { UInt(bitPattern: $0.hashValue) } ?? 0)
        }
    }

    /// Who asks: a command's name if it has one, else its type, turned into text only when a report
    /// reads it (`String(describing:)` of a type costs thousands of instructions a request).
    struct Label: @unchecked Sendable {
        // `@unchecked Sendable`: immutable; a metatype is a constant pointer.
        let name: String?
        let type: Any.Type

        init(name: String?, type: Any.Type) {
            self.name = name
            self.type = type
        }

        init(_ name: String) { self.init(name: name, type: Never.self) }

        var text: String { name ?? TypeNames.name(of: type) }
    }

    /// A category's holder: for stall reports.
    struct Holder: Sendable {
        let ticket: UInt64
        let label: Label
        let since: UInt64

        var name: String { label.text }
    }

    /// A waiting request. An object, so that a release's walk of the line reads one without copying
    /// its fields (a struct's copy retained its label and waiter, and released them, for each request
    /// the walk passed).
    private final class Request: Sendable {
        let ticket: UInt64
        /// The numbers of its keys (see `ids`).
        let keys: KeyNumbers
        let label: Label
        /// Told when the request is granted after waiting (nil in tests of the book alone).
        let waiter: (any ExclusivityWaiter)?

        init(ticket: UInt64, keys: KeyNumbers, label: Label, waiter: (any ExclusivityWaiter)?) {
            (self.ticket, self.keys, self.label, self.waiter) = (ticket, keys, label, waiter)
        }
    }

    // Keys are numbered while a ticket (waiting or holding) names them, so that a release's walk of
    // the line indexes arrays instead of hashing keys: a dictionary look-up of a key hashes it with the
    // dictionary's seed each time, about 100 instructions, and a walk over requests for 1 to 3 of 8
    // categories made dozens of them a command (callgrind). A key no ticket names any more keeps its
    // number (a chain of commands in one category would otherwise give it back and take it again on
    // every command) until such idle keys are more than 64 and half the numbered ones: then they are
    // all given back at once, so a process that makes categories without end keeps a bounded book.

    /// The number of each key some ticket names.
    private var ids: [Key: Int] = [:]
    /// By number: the key (nil: the number is free).
    private var keyOf: [Key?] = []
    /// By number: its holder, if any.
    private var heldBy: [Holder?] = []
    /// By number: how many waiting requests need it.
    private var wantedCount: [Int] = []
    /// By number: how many tickets (waiting or holding) name it.
    private var uses: [Int] = []
    /// By number: the walk (``walks``) that last found it needed by an earlier waiting request.
    private var blockedIn: [UInt64] = []
    private var freeIDs: [Int] = []
    /// How many numbered keys no ticket names.
    private var idle = 0
    /// How many numbers have `wantedCount` above 0 and no holder: the keys a release's walk could
    /// still grant (none: no walk).
    private var freeWanted = 0
    private var walks: UInt64 = 0

    /// A live ticket's record: where it waits in `line`, or the keys it holds. A ticket is its
    /// slot's index in the low 32 bits and a count of requests above them, so that finding a ticket
    /// indexes an array: two dictionaries keyed by ticket (the line's positions, the holdings) hashed
    /// a ticket four to six times a command, about a tenth of an exclusive command's cost (callgrind).
    private struct Slot {
        /// The ticket using the slot (0: the slot is free).
        var ticket: UInt64 = 0
        /// Its index in `line` while it waits; -1 while it holds.
        var position = -1
        /// The keys it holds (while it holds).
        var keys = KeyNumbers()
    }

    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    /// How many tickets wait in `line`.
    private var waiting = 0
    /// Waiting requests in arrival order; a removed one leaves a hole (nil) until the next compaction,
    /// so taking a request out of a long line is O(1), not a shift of everything behind it.
    private var line: [Request?] = []
    /// `line` before this index holds only holes.
    private var head = 0
    /// The count of requests made, the high half of the next ticket: tickets grow in arrival order.
    private var nextTicket: UInt64 = 1

    /// Asks for `keys` for the command `name`: the ticket, and whether it was granted at once.
    mutating func request(_ keys: [Key], name: String, now: UInt64) -> (ticket: UInt64, granted: Bool) {
        request(keys, label: Label(name), now: now)
    }

    /// Asks for `keys` for the command `label` names: the ticket, and whether it was granted at once
    /// (else `waiter` is returned by the ``leave(_:now:)`` that grants it).
    mutating func request(
        _ keys: [Key], label: Label, waiter: (any ExclusivityWaiter)? = nil, now: UInt64
    ) -> (ticket: UInt64, granted: Bool) {
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            slot = slots.count
            slots.append(Slot())
        }
        let ticket = nextTicket << 32 | UInt64(slot)
        nextTicket += 1
        slots[slot].ticket = ticket
        var numbers = KeyNumbers()
        for key in keys { numbers.append(use(key)) }
        // Granted at once only if nobody waits for any of these keys and none is held.
        let blocked = numbers.contains { heldBy[$0] != nil || wantedCount[$0] > 0 }
        if blocked {
            slots[slot].position = line.count
            waiting += 1
            line.append(Request(ticket: ticket, keys: numbers, label: label, waiter: waiter))
            for id in numbers { want(id, by: 1) }
            return (ticket, false)
        }
        grant(ticket, numbers, label, now: now)
        return (ticket, true)
    }

    /// The ticket's command ended or left: its keys are released (or it leaves the line). Returns the
    /// tickets granted as a consequence, in order.
    mutating func leave(_ ticket: UInt64, now: UInt64) -> [UInt64] {
        leaveTellingWaiters(ticket, now: now).map(\.ticket)
    }

    /// A request granted by a release, and whom to tell.
    typealias Grant = (ticket: UInt64, waiter: (any ExclusivityWaiter)?)

    /// ``leave(_:now:)``, with the waiter of each request granted (the first inline: a release
    /// usually grants one request, and an array for it was an allocation a command).
    mutating func leaveTellingWaiters(_ ticket: UInt64, now: UInt64) -> SmallList<Grant> {
        guard let slot = slot(of: ticket) else { return SmallList() }
        let index = slots[slot].position
        if index >= 0 {
            if let request = remove(at: index) {
                for id in request.keys { unuse(id) }
            }
        } else {
            for id in slots[slot].keys {
                heldBy[id] = nil
                if wantedCount[id] > 0 { freeWanted += 1 }
                unuse(id)
            }
        }
        slots[slot] = Slot()
        freeSlots.append(slot)
        // No key anyone waits for is free: nothing to grant (the walk, and the compaction, are skipped).
        if freeWanted == 0 {
            compact()
            return SmallList()
        }
        let granted = grantWaiting(now: now)
        compact()
        return granted
    }

    /// Grants, in arrival order, every waiting request whose keys are free and not needed by an earlier
    /// waiting request. Stops once every free key anyone waits for is blocked by an earlier request
    /// (then nothing further can be granted: so a long line of requests for a few categories is not
    /// walked to its end on every release).
    private mutating func grantWaiting(now: UInt64) -> SmallList<Grant> {
        var granted = SmallList<Grant>()
        walks += 1
        let walk = walks
        var blockedFree = 0
        var index = head
        while index < line.count, blockedFree < freeWanted {
            defer { index += 1 }
            guard let request = line[index] else { continue }
            if request.keys.allSatisfy({ heldBy[$0] == nil && blockedIn[$0] != walk }) {
                _ = remove(at: index)
                grant(request.ticket, request.keys, request.label, now: now)
                granted.append((request.ticket, request.waiter))
            } else {
                // Its keys, all wanted (it waits), now blocked for the requests behind it.
                for id in request.keys where blockedIn[id] != walk {
                    blockedIn[id] = walk
                    // A held key stays held during the walk; a free one blocked stays free.
                    if heldBy[id] == nil { blockedFree += 1 }
                }
            }
        }
        return granted
    }

    /// The number of `key`, made if no ticket names it yet; one more use.
    private mutating func use(_ key: Key) -> Int {
        if let id = ids[key] {
            if uses[id] == 0 { idle -= 1 }
            uses[id] += 1
            return id
        }
        let id: Int
        if let free = freeIDs.popLast() {
            id = free
            keyOf[id] = key
            uses[id] = 1
        } else {
            id = keyOf.count
            keyOf.append(key)
            heldBy.append(nil)
            wantedCount.append(0)
            uses.append(1)
            blockedIn.append(0)
        }
        ids[key] = id
        return id
    }

    /// One use fewer of number `id` (at none, neither held nor wanted: idle, see above).
    private mutating func unuse(_ id: Int) {
        uses[id] -= 1
        guard uses[id] == 0 else { return }
        idle += 1
        if idle > 64 && idle * 2 > ids.count { giveBackIdleNumbers() }
    }

    /// Gives back the number of every key no ticket names.
    private mutating func giveBackIdleNumbers() {
        for (key, id) in ids where uses[id] == 0 {
            ids[key] = nil
            keyOf[id] = nil
            freeIDs.append(id)
        }
        idle = 0
    }

    private mutating func want(_ id: Int, by change: Int) {
        let before = wantedCount[id]
        let after = before + change
        wantedCount[id] = after
        guard heldBy[id] == nil else { return }
        if before == 0 && after > 0 { freeWanted += 1 }
        if before > 0 && after == 0 { freeWanted -= 1 }
    }

    /// Takes the waiting request at `index` out of the line (its keys still in use: the caller
    /// grants it or lets them go).
    private mutating func remove(at index: Int) -> Request? {
        // Moved out of the line (no retain and release).
        var taken: Request? = nil
        swap(&taken, &line[index])
        guard let request = taken else { return nil }
        slots[Self.slotIndex(request.ticket)].position = -1
        waiting -= 1
        for id in request.keys { want(id, by: -1) }
        while head < line.count, line[head] == nil { head += 1 }
        return request
    }

    /// Drops the holes at the front once they are most of the line (never during a walk of it).
    private mutating func compact() {
        guard head > 64 && head * 2 > line.count else { return }
        line.removeFirst(head)
        head = 0
        for (offset, request) in line.enumerated() {
            if let request { slots[Self.slotIndex(request.ticket)].position = offset }
        }
    }

    private mutating func grant(_ ticket: UInt64, _ keys: KeyNumbers, _ label: Label, now: UInt64) {
        for id in keys {
            if heldBy[id] == nil && wantedCount[id] > 0 { freeWanted -= 1 }
            heldBy[id] = Holder(ticket: ticket, label: label, since: now)
        }
        slots[Self.slotIndex(ticket)].keys = keys
    }

    private static func slotIndex(_ ticket: UInt64) -> Int { Int(truncatingIfNeeded: ticket & 0xFFFF_FFFF) }

    /// The slot of `ticket` if it is live (a ticket left before, or never made, has none).
    private func slot(of ticket: UInt64) -> Int? {
        let slot = Self.slotIndex(ticket)
        return slot < slots.count && slots[slot].ticket == ticket ? slot : nil
    }

    /// Who holds `key`, if anyone.
    func holder(of key: Key) -> Holder? { ids[key].flatMap { heldBy[$0] } }

    /// A request's key numbers: up to three inline (a request names one to three categories as a rule),
    /// so a request allocates no array for them.
    struct KeyNumbers: Sequence, Sendable {
        private var count: Int32 = 0
        private var first: Int32 = 0
        private var second: Int32 = 0
        private var third: Int32 = 0
        private var more: [Int]?

        mutating func append(_ id: Int) {
            switch count {
            case 0: first = Int32(id)
            case 1: second = Int32(id)
            case 2: third = Int32(id)
            default: more = (more ?? []) + [id]
            }
            count += 1
        }

        @inline(__always)
        subscript(index: Int32) -> Int {
            switch index {
            case 0: Int(first)
            case 1: Int(second)
            case 2: Int(third)
            default: more![Int(index) - 3]
            }
        }

        struct Iterator: IteratorProtocol {
            let numbers: KeyNumbers
            var index: Int32 = 0

            @inline(__always)
            mutating func next() -> Int? {
                guard index < numbers.count else { return nil }
                defer { index += 1 }
                return numbers[index]
            }
        }

        @inline(__always)
        func makeIterator() -> Iterator { Iterator(numbers: self) }

        /// Whether `predicate` holds for every number (no iterator: the walk's inner test).
        @inline(__always)
        func allSatisfy(_ predicate: (Int) -> Bool) -> Bool {
            var index: Int32 = 0
            while index < count {
                if !predicate(self[index]) { return false }
                index += 1
            }
            return true
        }
    }

    /// Keys some ticket names now, and keys numbered (for tests: numbers are given back).
    var keysInUse: Int { ids.values.filter { uses[$0] > 0 }.count }
    var keysNumbered: Int { ids.count }

    /// Whether `ticket` is waiting in line.
    func isWaiting(_ ticket: UInt64) -> Bool { slot(of: ticket).map { slots[$0].position >= 0 } ?? false }

    /// Requests waiting (for tests).
    var waitingCount: Int { waiting }
}

/// Told when its request is granted (a command; a test's stand-in): an object,
/// not a closure, so a request allocates no context.
protocol ExclusivityWaiter: AnyObject, Sendable {
    /// `lane`: granted by a release on the thread where the holder ended; the first such command
    /// continues on a lane queue, as a dependent made ready by an ending does (see `QueuePool`).
    func categoriesGranted(_ ticket: UInt64, lane: Bool)
}

/// The process's ``ExclusivityBook``, and the commands to tell when their request is granted.
enum Exclusivity {
    // Guards the book (which keeps the waiters of waiting requests). Taken by every thread that
    // registers, starts or ends an exclusive command, each time for a moment: an adaptive mutex (a
    // plain one put the thread registering 100,000 exclusive commands to sleep about 15,000 times).
    private static let book = Locked(contended: ExclusivityBook())

    /// Asks for `keys` for the command `label` names: the ticket to leave with, and whether they are
    /// all held now; if not, `waiter` is told once they are, on the thread that released the last of
    /// them.
    static func request(_ keys: [ExclusivityBook.Key], label: ExclusivityBook.Label, waiter: any ExclusivityWaiter)
        -> (ticket: UInt64, granted: Bool)
    {
        let now = DispatchTime.now().uptimeNanoseconds
        return book.withLock { $0.request(keys, label: label, waiter: waiter, now: now) }
    }

    /// Releases the ticket's keys, or takes it out of the line; grants whoever is next (the first of
    /// them on a lane when `lane`).
    static func leave(_ ticket: UInt64, lane: Bool = false) {
        let now = DispatchTime.now().uptimeNanoseconds
        let next = book.withLock { $0.leaveTellingWaiters(ticket, now: now) }
        var lane = lane
        for (granted, waiter) in next {
            waiter?.categoriesGranted(granted, lane: lane)
            lane = false
        }
    }

    /// Who holds `key` (for stall reports).
    static func holder(of key: ExclusivityBook.Key) -> ExclusivityBook.Holder? {
        book.withLock { $0.holder(of: key) }
    }
}
