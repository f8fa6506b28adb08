import Foundation

/// A list with its first element inline and the rest in an array: a command's dependencies and its
/// dependents, and the drains a change wakes (``Wakeups``: waking one observer, a stage of a chain,
/// allocates nothing). Most commands have none or one of each (a chain, a fan-out's leaves), and a
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

    init(_ elements: [Element]) {
        for element in elements { append(element) }
    }

    var isEmpty: Bool { first == nil }
    var count: Int { first == nil ? 0 : 1 + (tail?.count ?? 0) }

    subscript(index: Int) -> Element {
        index == 0 ? first! : tail![index - 1]
    }

    /// Appends `element`; `rest` starts with room for 2 and grows by half (2, 5, 8, 14...; the
    /// allocator's rounding makes it 3, 5, 9, 15), not by doubling: a node's lists are built once
    /// and kept for its life, and a doubled array left a lattice node (10 edges) about 170 bytes of
    /// empty room in its two lists; a first room of 4 (5 after rounding) left a random DAG's node (3
    /// edges each way) 16 bytes of it in each list. Still amortised O(1) (a fan-in of a million edges).
    mutating func append(_ element: Element) {
        if first == nil {
            first = element
            return
        }
        var rest = tail ?? []
        tail = nil  // `rest` is then the array's only reference: appended to in place
        if rest.count == rest.capacity { rest.reserveCapacity(rest.isEmpty ? 2 : rest.count + rest.count / 2 + 1) }
        rest.append(element)
        tail = rest
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

/// A command's dependencies.
typealias OperationList = SmallList<Operation>

extension SmallList where Element == Operation {
    func contains(_ operation: Operation) -> Bool {
        first === operation || (tail?.contains { $0 === operation } ?? false)
    }

    mutating func remove(_ operation: Operation) {
        self = SmallList(array.filter { $0 !== operation })
    }
}
