import Foundation

/// A list with its first element inline and the rest in an array: the drains a change wakes
/// (``Wakeups``: waking one observer, a stage of a chain, allocates nothing) and an exclusivity book's
/// grants (a command's edges are a ``RefList``, whose tail has no array header). Most commands have none or one of each (a chain, a fan-out's leaves), and a
/// one-element array is a 40-to-48-byte allocation per command: for a dependency, kept for the
/// command's whole life; for a dependent, from the execute walk until the command ends, which is
/// every command of a graph at once (about 60 bytes a command at the peak of a million-node chain).
struct SmallList<Element>: Sequence {
    private(set) var first: Element?
    /// Every element after `first`; nil while there is at most one. Optional, not an empty array: the
    /// same 8 bytes, and a list of one is destroyed without releasing the empty array's storage (a
    /// `Wakeups` is made and destroyed on every value a stage sends).
    private var tail: [Element]?

    /// Every element after `first`.
    var rest: [Element] { tail ?? [] }

    init() {}

    init(_ element: Element) { first = element }

    var count: Int { first == nil ? 0 : 1 + (tail?.count ?? 0) }

    subscript(index: Int) -> Element {
        index == 0 ? first! : tail![index - 1]
    }

    /// Appends `element`; `rest` starts with room for 2 and grows by half (2, 5, 8, 14...; the
    /// allocator's rounding makes it 3, 5, 9, 15), not by doubling: a node's lists are built once
    /// and kept for its life, and a doubled array left a lattice node (10 edges) about 170 bytes of
    /// empty room in its two lists; a first room of 4 (5 after rounding) left a random DAG's node (3
    /// edges each way) 16 bytes of it in each list. Still amortised O(1) (a fan-in of a million edges).
    /// Returns the new count.
    @discardableResult
    mutating func append(_ element: Element) -> Int {
        if first == nil {
            first = element
            return 1
        }
        var rest = tail ?? []
        tail = nil  // `rest` is then the array's only reference: appended to in place
        if rest.count == rest.capacity { rest.reserveCapacity(rest.isEmpty ? 2 : rest.count + rest.count / 2 + 1) }
        rest.append(element)
        tail = rest
        return rest.count + 1
    }

    /// The elements as an array (allocates when there are any).
    var array: [Element] {
        guard let first else { return [] }
        return [first] + (tail ?? [])
    }

    /// Iterates without making an array.
    struct Iterator: IteratorProtocol {
        fileprivate let list: SmallList
        fileprivate var index = 0

        mutating func next() -> Element? {
            guard index < list.count else { return nil }
            defer { index += 1 }
            return list[index]
        }
    }

    func makeIterator() -> Iterator { Iterator(list: self) }
}

extension SmallList: Sendable where Element: Sendable {}

/// What ``SmallList`` and ``RefList`` share: the first element inline, the others appended after it.
protocol InlineFirstList {
    associatedtype Element
    var first: Element? { get }
    init()
    /// Appends `element`; returns the new count.
    @discardableResult
    mutating func append(_ element: Element) -> Int
}

extension InlineFirstList {
    init(_ elements: [Element]) {
        self.init()
        for element in elements { append(element) }
    }

    var isEmpty: Bool { first == nil }
}

extension SmallList: InlineFirstList {}
extension RefList: InlineFirstList {}

/// A list of references with its first element inline and the rest in a tail buffer (``ObjectTail``):
/// a command's dependencies and its dependents. Most commands have none or one of each (a chain, a
/// fan-out's leaves), and a one-element array is a 40-to-48-byte allocation per command: for a
/// dependency, kept for the command's whole life; for a dependent, from the execute walk until the
/// command ends, which is every command of a graph at once (about 60 bytes a command at the peak of a
/// million-node chain).
struct RefList<Element: AnyObject>: Sequence {
    private(set) var first: Element?
    /// Every element after `first`; nil while there is at most one. See ``ObjectTail`` for why it is
    /// not an array.
    ///
    /// `nonisolated(unsafe)` (a `ManagedBuffer` is not `Sendable`): the tail is written only through a
    /// list that holds the only reference to it (``append(_:)`` copies a shared tail first, as `Array`
    /// does), so a list sent to another thread shares nothing that is written; the lists themselves
    /// live in a command's state, under its lock, or are values taken out of it.
    nonisolated(unsafe) private var tail: ObjectTail?

    init() {}

    init(_ element: Element) { first = element }

    var count: Int { first == nil ? 0 : 1 + (tail?.count ?? 0) }

    subscript(index: Int) -> Element {
        index == 0 ? first! : unsafeDowncast(tail!.slot(index - 1)!, to: Element.self)
    }

    /// Whether there is an element at `index` (`count > index`), without counting the tail.
    func hasElement(at index: Int) -> Bool {
        if index == 0 { return first != nil }
        guard let tail, index - 1 < tail.capacity else { return false }
        return tail.isFilled(index - 1)
    }

    /// The element at `index`, or nil past the last: a walk's cursor, without counting the tail.
    func element(at index: Int) -> Element? {
        if index == 0 { return first }
        guard let tail, index - 1 < tail.capacity, let object = tail.slot(index - 1) else { return nil }
        return unsafeDowncast(object, to: Element.self)
    }

    /// Whether `element` is in the list (by identity), without retaining the others.
    func contains(_ element: Element) -> Bool {
        first === element || (tail?.contains(ObjectIdentifier(element)) ?? false)
    }

    /// Appends `element`; the tail starts with room for 2 and grows by half (2, 5, 8, 14...; the
    /// allocator's rounding makes it 3, 5, 9, 15), not by doubling: a node's lists are built once
    /// and kept for its life, and a doubled tail left a lattice node (10 edges) about 170 bytes of
    /// empty room in its two lists; a first room of 4 (5 after rounding) left a random DAG's node (3
    /// edges each way) 16 bytes of it in each list. Still amortised O(1) (a fan-in of a million edges).
    /// A tail another copy of the list shares is copied first (the list is a value). Returns the new
    /// count.
    @discardableResult
    mutating func append(_ element: Element) -> Int {
        if first == nil {
            first = element
            return 1
        }
        let capacity = tail?.capacity ?? 0
        let count = tail?.count(capacity: capacity) ?? 0
        let unique = isKnownUniquelyReferenced(&tail)
        if count == capacity || !unique {
            let room = count < capacity ? capacity : count == 0 ? 2 : count + count / 2 + 1
            tail = ObjectTail.make(room: room, from: tail, count: count, moving: unique)
        }
        tail!.put(element, at: count)
        return count + 2
    }

    /// Removes `element` (by identity), keeping the order.
    mutating func remove(_ element: Element) {
        self = RefList(array.filter { $0 !== element })
    }

    /// Every element after `first`.
    var rest: [Element] { tail?.objects.map { unsafeDowncast($0, to: Element.self) } ?? [] }

    /// The elements as an array (allocates when there are any).
    var array: [Element] {
        guard let first else { return [] }
        return [first] + rest
    }

    /// Iterates without making an array.
    struct Iterator: IteratorProtocol {
        fileprivate let list: RefList
        fileprivate var index = 0
        /// The tail's room, read once (it asks the allocator).
        fileprivate let room: Int

        mutating func next() -> Element? {
            if index == 0 {
                index = 1
                return list.first
            }
            guard index - 1 < room, let object = list.tail!.slot(index - 1) else { return nil }
            index += 1
            return unsafeDowncast(object, to: Element.self)
        }
    }

    func makeIterator() -> Iterator { Iterator(list: self, room: tail?.capacity ?? 0) }
}

extension RefList: Sendable where Element: Sendable {}

/// A command's dependencies.
typealias OperationList = RefList<Operation>

/// A ``RefList``'s elements after its first: slots filled from the start, nil after the last, so the
/// buffer keeps no count (found by a binary search for the first nil) and no room (the allocator's
/// size of the block, ``ManagedBuffer/capacity``). An `Array` keeps both, 16 bytes of header more: a
/// lattice node's two lists of 9 more edges were two 112-byte blocks, now two 96-byte ones (16 + 9 x 8
/// = 88 bytes asked for, against 104), and a random DAG node's lists of 2 more a 48-byte block instead
/// of a 64-byte one. Not generic: its deinit and its loops over the slots are compiled for one type
/// (a generic tail's deinit looked `Optional<Element>`'s metadata up in the runtime's table each time,
/// about 330 instructions a list). The price: an append counts the tail (about 12 instructions a
/// halving: a fan-in of 6,000 edges paid about 370 instructions a node more, 1.4%), and its room is the
/// allocator's answer (`malloc_usable_size`, `malloc_size`).
final class ObjectTail: ManagedBuffer<Void, AnyObject?> {
    /// A tail with room for at least `room` elements (every slot nil), holding the first `count` of
    /// `source`'s: moved out of it (`moving`: the caller held its only reference and drops it; its
    /// slots are left nil) or copied.
    static func make(room: Int, from source: ObjectTail?, count: Int, moving: Bool) -> ObjectTail {
        let tail = unsafeDowncast(create(minimumCapacity: room) { _ in }, to: ObjectTail.self)
        let capacity = tail.capacity
        tail.withUnsafeMutablePointerToElements { slots in
            if let source {
                source.withUnsafeMutablePointerToElements { old in
                    if moving {
                        slots.moveInitialize(from: old, count: count)
                        old.initialize(repeating: nil, count: count)
                    } else {
                        slots.initialize(from: old, count: count)
                    }
                }
            }
            (slots + count).initialize(repeating: nil, count: capacity - count)
        }
        return tail
    }

    deinit {
        _ = withUnsafeMutablePointerToElements { $0.deinitialize(count: capacity) }
    }

    /// How many slots are filled: they are the first ones.
    var count: Int { count(capacity: capacity) }

    /// ``count`` with the room already read.
    func count(capacity: Int) -> Int {
        withUnsafeMutablePointerToElements { slots in
            if slots[capacity - 1] != nil { return capacity }
            // slots[low - 1] is filled (or low is 0) and slots[high] is nil.
            var low = 0
            var high = capacity - 1
            while low < high {
                let middle = (low + high) / 2
                if slots[middle] == nil { high = middle } else { low = middle + 1 }
            }
            return low
        }
    }

    func slot(_ index: Int) -> AnyObject? { withUnsafeMutablePointerToElements { $0[index] } }

    func isFilled(_ index: Int) -> Bool { withUnsafeMutablePointerToElements { $0[index] != nil } }

    /// Whether a slot holds the object `id` names: compared as addresses, without retaining each.
    func contains(_ id: ObjectIdentifier) -> Bool {
        let capacity = self.capacity
        let wanted = UInt(bitPattern: id)
        return withUnsafeMutablePointerToElements { slots in
            let words = UnsafeRawPointer(slots)
            for index in 0..<capacity {
                let word = words.load(fromByteOffset: index &* MemoryLayout<UInt>.stride, as: UInt.self)
                if word == wanted { return true }
                if word == 0 { return false }  // nil: the filled slots ended
            }
            return false
        }
    }

    /// Fills the first empty slot, `index` (the caller holds the only reference).
    func put(_ object: AnyObject, at index: Int) {
        withUnsafeMutablePointerToElements { $0[index] = object }
    }

    var objects: [AnyObject] {
        let count = self.count
        return withUnsafeMutablePointerToElements { slots in (0..<count).map { slots[$0]! } }
    }
}
