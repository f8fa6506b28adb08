/// The values of one run, addressed by absolute index (0 for the first value ever sent), with the
/// oldest ones dropped as the replay policy allows.
///
/// Not generic, so the command's state machine that holds it is not either: a generic state
/// (`CommandStateMachine<Output>`) made every command look its type's metadata up in the runtime's
/// hash table when it was made, locked and destroyed (about 2,500 instructions a command, measured
/// with callgrind on a `flatMap` making an inner per value). The values live in a ``RawRing`` (raw
/// memory); the typed operations take the type as a generic parameter of the method (the command
/// passes its `Output`), so typed work is done inline with `Output`'s own metadata; dropping values
/// (``trim(below:)``, untyped) destroys them through the ring's stored type.
///
/// A zero-sized `Output` (`Void`, the output of most commands in a graph) is counted, not stored: such
/// a command allocates no ring (about 80 bytes a command).
///
/// - Complexity: `append`, `value(at:as:)` and `trim(below:)` are amortised O(1).
struct ValueLog: @unchecked Sendable {
    // `@unchecked Sendable`: the ring is only touched under the owning command's lock (the log is
    // part of its state machine), and copied before a write when shared (`isKnownUniquelyReferenced`).
    private var ring: RawRing?
    /// Absolute index of the oldest kept value.
    private(set) var startIndex = 0
    /// The values kept of a zero-sized `Output`: counted, not stored (0 for any other type, whose
    /// values are in `ring`).
    private var zeroSizedCount = 0

    /// Absolute index one past the newest value.
    @inline(__always)
    var endIndex: Int { startIndex &+ (ring?.count ?? zeroSizedCount) }

    @inline(__always)
    var isEmpty: Bool { (ring?.count ?? zeroSizedCount) == 0 }

    @inline(__always)
    mutating func append<Output: Sendable>(_ value: Output) {
        if MemoryLayout<Output>.size == 0 {
            zeroSizedCount += 1
            return
        }
        if ring == nil {
            ring = RawRing(of: Output.self)
        } else if !isKnownUniquelyReferenced(&ring!) {
            ring = ring!.copy()
        }
        let ring = ring!
        if ring.count == ring.capacity { ring.grow() }
        ring.slot(ring.count).initializeMemory(as: Output.self, to: value)
        ring.count += 1
    }

    /// Counts a value that nobody will read from the log (delivered in place, nothing kept), if the
    /// log is empty: the indexes move on, nothing is stored. False (nothing done) otherwise.
    @inline(__always)
    mutating func skipIfEmpty() -> Bool {
        guard isEmpty else { return false }
        startIndex += 1
        return true
    }

    /// When the log keeps exactly one value: replaces it with `value`, as `append(value)` then
    /// `trim(below: endIndex - 1)` would (the indexes move on by one), in place; false (nothing
    /// done) otherwise, or when the ring is shared.
    @inline(__always)
    mutating func replaceOnlyValue<Output: Sendable>(with value: Output) -> Bool {
        // The ring first: a zero-sized `Output` never has one, and its size is looked up at run time
        // in this unspecialised code.
        if ring != nil {
            guard ring!.count == 1, isKnownUniquelyReferenced(&ring!) else { return false }
            ring!.slot(0).assumingMemoryBound(to: Output.self).pointee = value
        } else {
            guard MemoryLayout<Output>.size == 0, zeroSizedCount == 1 else { return false }
        }
        startIndex += 1
        return true
    }

    /// The value at absolute index `index`, of the type it was appended as.
    @inline(__always)
    func value<Output: Sendable>(at index: Int, as type: Output.Type) -> Output {
        precondition(
            index >= startIndex && index < endIndex, "ValueLog: index \(index) outside \(startIndex)..<\(endIndex)")
        if MemoryLayout<Output>.size == 0 {
            // A zero-sized value has no bytes: any aligned address reads one.
            return UnsafeRawPointer(bitPattern: MemoryLayout<Output>.alignment)!.assumingMemoryBound(to: Output.self)
                .pointee
        }
        return ring!.slot(index - startIndex).assumingMemoryBound(to: Output.self).pointee
    }

    /// Drops every value whose absolute index is below `index` (destroyed through the ring's type).
    @inline(__always)
    mutating func trim(below index: Int) {
        let drop = min(index, endIndex) - startIndex
        guard drop > 0 else { return }
        guard ring != nil else {
            zeroSizedCount -= drop
            startIndex += drop
            return
        }
        if !isKnownUniquelyReferenced(&ring!) { ring = ring!.copy() }
        ring!.removeFirst(drop)
        startIndex += drop
    }
}

/// A growable ring of values of one type in raw memory (power-of-two capacity), for ``ValueLog``;
/// not generic, so using it costs no metadata look-up. Typed operations it cannot do inline (moving
/// values when it grows, copying, destroying what is left) open the stored type. Memory is given back when it empties after having grown past 64 values, so an endless
/// stream keeps its footprint flat.
package final class RawRing {
    // `@exclusivity(unchecked)`: a ring is only touched under its owner's lock, and none of its
    // methods calls out while changing a field (the runtime's dynamic check is not needed).
    @exclusivity(unchecked) private(set) var buffer: UnsafeMutableRawPointer?
    @exclusivity(unchecked) private(set) var capacity = 0
    /// Physical index of the oldest value.
    @exclusivity(unchecked) private(set) var head = 0
    @exclusivity(unchecked) package internal(set) var count = 0
    private let stride: Int
    private let alignment: Int
    /// The values' type, opened for the few typed operations done here (no closure, no allocation).
    private let elementType: any Sendable.Type

    package init<Value: Sendable>(of type: Value.Type) {
        stride = Swift.max(1, MemoryLayout<Value>.stride)
        alignment = MemoryLayout<Value>.alignment
        elementType = type
    }

    private init(copying other: RawRing) {
        (stride, alignment, elementType) = (other.stride, other.alignment, other.elementType)
    }

    private static func move<Value: Sendable>(_: Value.Type, from: UnsafeMutableRawPointer, to: UnsafeMutableRawPointer)
    {
        to.assumingMemoryBound(to: Value.self).moveInitialize(from: from.assumingMemoryBound(to: Value.self), count: 1)
    }

    private static func copy<Value: Sendable>(_: Value.Type, from: UnsafeMutableRawPointer, to: UnsafeMutableRawPointer)
    {
        to.initializeMemory(as: Value.self, to: from.assumingMemoryBound(to: Value.self).pointee)
    }

    private static func destroy<Value: Sendable>(_: Value.Type, _ pointer: UnsafeMutableRawPointer) {
        pointer.assumingMemoryBound(to: Value.self).deinitialize(count: 1)
    }

    /// The memory of the value at `offset` from the oldest (or of the next one, at `count`).
    @inline(__always)
    func slot(_ offset: Int) -> UnsafeMutableRawPointer {
        // Wrapping arithmetic: the indexes are below the capacity, whose slots are allocated (no
        // overflow to check: a few instructions on every value kept).
        buffer! + ((head &+ offset) & (capacity &- 1)) &* stride
    }

    /// Destroys and forgets the `count` oldest values (their type opened once).
    func removeFirst(_ count: Int) {
        Self.destroyFirst(elementType, count, of: self)
    }

    private static func destroyFirst<Value: Sendable>(_: Value.Type, _ count: Int, of ring: RawRing) {
        for _ in 0..<count {
            ring.slot(0).assumingMemoryBound(to: Value.self).deinitialize(count: 1)
            ring.removeFirst()
        }
    }

    /// Forgets the oldest value (already deinitialised by the caller).
    @inline(__always)
    func removeFirst() {
        head = (head + 1) & (capacity - 1)
        count -= 1
        if count == 0 {
            head = 0
            if capacity > 64 { deallocate() }
        }
    }

    func grow() {
        let newCapacity = Swift.max(4, capacity * 2)
        let newBuffer = UnsafeMutableRawPointer.allocate(byteCount: newCapacity * stride, alignment: alignment)
        for offset in 0..<count { Self.move(elementType, from: slot(offset), to: newBuffer + offset * stride) }
        buffer?.deallocate()
        buffer = newBuffer
        capacity = newCapacity
        head = 0
    }

    func copy() -> RawRing {
        let copy = RawRing(copying: self)
        while copy.capacity < count { copy.grow() }
        for offset in 0..<count { Self.copy(elementType, from: slot(offset), to: copy.slot(offset)) }
        copy.count = count
        return copy
    }

    private func deallocate() {
        buffer?.deallocate()
        buffer = nil
        capacity = 0
    }

    deinit {
        for offset in 0..<count { Self.destroy(elementType, slot(offset)) }
        buffer?.deallocate()
    }
}

/// Typed use of a ``RawRing`` as a FIFO, for combinator nodes whose state must not be generic (see
/// ``ValueLog``): `Value` must be the type the ring was made for.
extension RawRing {
    /// Appends `value` at the back.
    @inline(__always)
    package func push<Value>(_ value: Value) {
        if count == capacity { grow() }
        slot(count).initializeMemory(as: Value.self, to: value)
        count += 1
    }

    /// Removes and returns the oldest value; the ring must not be empty.
    @inline(__always)
    package func popFirst<Value>(as type: Value.Type) -> Value {
        precondition(count > 0, "RawRing: popFirst on an empty ring")
        let value = slot(0).assumingMemoryBound(to: Value.self).move()
        removeFirst()
        return value
    }

    /// The oldest value; the ring must not be empty.
    @inline(__always)
    package func first<Value>(as type: Value.Type) -> Value {
        precondition(count > 0, "RawRing: first on an empty ring")
        return slot(0).assumingMemoryBound(to: Value.self).pointee
    }
}
