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

    private struct Request: Sendable {
        let ticket: UInt64
        let keys: [Key]
        let label: Label
        /// Told when the request is granted after waiting (nil in tests of the book alone).
        let waiter: (any ExclusivityWaiter)?
    }

    private var held: [Key: Holder] = [:]
    /// The keys each holding ticket holds.
    private var holdings: [UInt64: [Key]] = [:]
    /// Waiting requests in arrival order; a removed one leaves a hole (nil) until the next compaction,
    /// so taking a request out of a long line is O(1), not a shift of everything behind it.
    private var line: [Request?] = []
    /// Where each waiting ticket is in `line`.
    private var position: [UInt64: Int] = [:]
    /// `line` before this index holds only holes.
    private var head = 0
    /// How many waiting requests need each key (no entry: none), so a request's check is O(its keys).
    private var wanted: [Key: Int] = [:]
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
        let ticket = nextTicket
        nextTicket += 1
        let request = Request(ticket: ticket, keys: keys, label: label, waiter: waiter)
        // Granted at once only if nobody waits for any of these keys and none is held.
        let blocked = keys.contains { held[$0] != nil || wanted[$0] != nil }
        if blocked {
            position[ticket] = line.count
            line.append(request)
            for key in keys { wanted[key, default: 0] += 1 }
            return (ticket, false)
        }
        grant(request, now: now)
        return (ticket, true)
    }

    /// The ticket's command ended or left: its keys are released (or it leaves the line). Returns the
    /// tickets granted as a consequence, in order.
    mutating func leave(_ ticket: UInt64, now: UInt64) -> [UInt64] {
        leaveTellingWaiters(ticket, now: now).map(\.ticket)
    }

    /// ``leave(_:now:)``, with the waiter of each request granted.
    mutating func leaveTellingWaiters(_ ticket: UInt64, now: UInt64)
        -> [(ticket: UInt64, waiter: (any ExclusivityWaiter)?)]
    {
        if let index = position[ticket] {
            remove(at: index)
        } else {
            guard let keys = holdings.removeValue(forKey: ticket) else { return [] }
            for key in keys { held[key] = nil }
        }
        // Nobody waits: nothing to grant (the walk, and the compaction, are skipped).
        if wanted.isEmpty {
            compact()
            return []
        }
        let granted = grantWaiting(now: now)
        compact()
        return granted
    }

    /// Grants, in arrival order, every waiting request whose keys are free and not needed by an earlier
    /// waiting request. Stops once every key anyone waits for is blocked (so a long line of requests
    /// for a few categories is not walked to its end on every release).
    private mutating func grantWaiting(now: UInt64) -> [(ticket: UInt64, waiter: (any ExclusivityWaiter)?)] {
        var granted: [(ticket: UInt64, waiter: (any ExclusivityWaiter)?)] = []
        var blocked = BlockedKeys()
        var index = head
        while index < line.count, blocked.count < wanted.count {
            defer { index += 1 }
            guard let request = line[index] else { continue }
            if request.keys.allSatisfy({ held[$0] == nil && !blocked.contains($0) }) {
                remove(at: index)
                grant(request, now: now)
                granted.append((request.ticket, request.waiter))
            } else {
                for key in request.keys { blocked.insert(key) }
            }
        }
        return granted
    }

    /// Keys an earlier waiting request needs, during one walk: usually a few, so a list (no hashing);
    /// a set once there are many, so a line of thousands of categories is not walked quadratically.
    private struct BlockedKeys {
        private var few: [Key] = []
        private var many: Set<Key>?

        var count: Int { many?.count ?? few.count }

        func contains(_ key: Key) -> Bool { many?.contains(key) ?? few.contains(key) }

        mutating func insert(_ key: Key) {
            if many != nil {
                many!.insert(key)
            } else if !few.contains(key) {
                few.append(key)
                if few.count > 16 { many = Set(few) }
            }
        }
    }

    /// Takes the waiting request at `index` out of the line.
    private mutating func remove(at index: Int) {
        // Moved out, not copied (a copy retains its keys, label and waiter).
        var taken: Request? = nil
        swap(&taken, &line[index])
        guard let request = taken else { return }
        position[request.ticket] = nil
        for key in request.keys {
            let left = wanted[key, default: 1] - 1
            wanted[key] = left > 0 ? left : nil
        }
        while head < line.count, line[head] == nil { head += 1 }
    }

    /// Drops the holes at the front once they are most of the line (never during a walk of it).
    private mutating func compact() {
        guard head > 64 && head * 2 > line.count else { return }
        line.removeFirst(head)
        head = 0
        for (offset, request) in line.enumerated() {
            if let request { position[request.ticket] = offset }
        }
    }

    private mutating func grant(_ request: Request, now: UInt64) {
        for key in request.keys { held[key] = Holder(ticket: request.ticket, label: request.label, since: now) }
        holdings[request.ticket] = request.keys
    }

    /// Who holds `key`, if anyone.
    func holder(of key: Key) -> Holder? { held[key] }

    /// Whether `ticket` is waiting in line.
    func isWaiting(_ ticket: UInt64) -> Bool { position[ticket] != nil }

    /// Requests waiting (for tests).
    var waitingCount: Int { position.count }
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
