import CommandCore

/// The part of `Synchronization.Atomic`'s interface the tests use, guarded by the library's lock:
/// `Synchronization` needs macOS 15 / iOS 18, above the package's floor. (The orderings are accepted
/// and ignored: a mutex orders everything.)
public final class Atomic<Value: Sendable>: Sendable {
    private let value: Locked<Value>

    public init(_ value: Value) { self.value = Locked(value) }

    public func load(ordering: AtomicOrder) -> Value { value.withLock { $0 } }

    public func store(_ newValue: Value, ordering: AtomicOrder) { value.withLock { $0 = newValue } }
}

extension Atomic where Value: FixedWidthInteger {
    @discardableResult
    public func add(_ operand: Value, ordering: AtomicOrder) -> (oldValue: Value, newValue: Value) {
        value.withLock { value in
            let old = value
            value &+= operand
            return (old, value)
        }
    }

    @discardableResult
    public func subtract(_ operand: Value, ordering: AtomicOrder) -> (oldValue: Value, newValue: Value) {
        value.withLock { value in
            let old = value
            value &-= operand
            return (old, value)
        }
    }
}

/// Accepted for source compatibility with `Synchronization`'s orderings.
public enum AtomicOrder: Sendable {
    case relaxed, acquiring, releasing, acquiringAndReleasing, sequentiallyConsistent
}
