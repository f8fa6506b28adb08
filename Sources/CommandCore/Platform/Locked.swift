#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value guarded by a `pthread_mutex_t`, both in one allocation (a `ManagedBuffer`).
///
/// Why not `Synchronization.Mutex`, which measured 2 ns faster uncontended here: on Linux its futex
/// calls are invisible to ThreadSanitizer, which then reports every access it guards as a race, so
/// `swift test --sanitize=thread` would say nothing useful about this library. A pthread mutex is
/// understood by TSan, so a clean TSan run means something.
///
/// Never call user code, or take another command's lock, inside `withLock`.
package struct Locked<Value>: @unchecked Sendable {
    // `@unchecked Sendable`: the value is only reached through `withLock`, under the mutex.
    private let storage: LockStorage<Value>

    private init(storage: LockStorage<Value>) { self.storage = storage }

    package static func make(_ value: Value) -> Locked<Value> { Locked(storage: LockStorage.make(value)) }

    package init(_ value: Value) { storage = LockStorage.make(value) }

    @inline(__always)
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withLock(body)
    }
}

/// The allocation behind ``Locked``: the value as header, the mutex as the single element.
final class LockStorage<Value>: ManagedBuffer<Value, pthread_mutex_t> {
    static func make(_ value: Value) -> LockStorage<Value> {
        let buffer = LockStorage<Value>.create(minimumCapacity: 1) { _ in value }
        let storage = unsafeDowncast(buffer, to: LockStorage<Value>.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            let status = pthread_mutex_init(mutex, nil)
            precondition(status == 0, "Locked: pthread_mutex_init failed (\(status))")
        }
        return storage
    }

    deinit {
        // The header (the value) is destroyed by ManagedBuffer itself.
        _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
    }

    @inline(__always)
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try withUnsafeMutablePointers { value, mutex in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }
}
