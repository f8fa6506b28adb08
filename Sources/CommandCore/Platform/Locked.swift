#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#else
    #error("AwesomeCommand needs Glibc, Musl or Darwin (a POSIX C library) for its locks and threads")
#endif

/// A value guarded by a `pthread_mutex_t`, both in one allocation (a `ManagedBuffer`).
///
/// Why not `Synchronization.Mutex`, which measured 2 ns faster uncontended here: on Linux its futex
/// calls are invisible to ThreadSanitizer, which then reports every access it guards as a race, so
/// `swift test --sanitize=thread` would say nothing useful about this library. A pthread mutex is
/// understood by TSan, so a clean TSan run means something.
///
/// Never call user code, or take another command's lock, inside `withLock`. `init` and `destroy` are
/// checked in every build, `lock` and `unlock` in debug builds, which use an error-checking mutex: taking
/// a lock twice on one thread stops there with a message instead of deadlocking.
package struct Locked<Value>: @unchecked Sendable {
    // `@unchecked Sendable`: the value is only reached through `withLock`, under the mutex.
    private let storage: LockStorage<Value>

    package init(_ value: Value) { storage = LockStorage.make(value) }

    /// A lock many threads take for short moments (a process-wide book): on Linux (glibc) its mutex
    /// spins briefly before sleeping (`PTHREAD_MUTEX_ADAPTIVE_NP`), so a thread that finds it taken
    /// for a few hundred instructions does not pay a futex sleep and wake; elsewhere, a plain mutex.
    package init(contended value: Value) { storage = LockStorage.make(value, adaptive: true) }

    @inline(__always)
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withLock(body)
    }
}

/// The allocation behind ``Locked``: the value as header, the mutex as the single element.
final class LockStorage<Value>: ManagedBuffer<Value, pthread_mutex_t> {
    static func make(_ value: Value, adaptive: Bool = false) -> LockStorage<Value> {
        let buffer = LockStorage<Value>.create(minimumCapacity: 1) { _ in value }
        let storage = unsafeDowncast(buffer, to: LockStorage<Value>.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            // Debug builds: an error-checking mutex, so a thread locking a lock it holds (a deadlock
            // in release) fails at once with a message instead of hanging. A contended lock is the
            // adaptive kind in every build (the kind the tests run is the kind that ships).
            #if DEBUG
                let checked: Int32? = Int32(PTHREAD_MUTEX_ERRORCHECK)
            #else
                let checked: Int32? = nil
            #endif
            let type = adaptive ? Self.adaptiveType ?? checked : checked
            let status: Int32
            if let type {
                var attributes = pthread_mutexattr_t()
                pthread_mutexattr_init(&attributes)
                pthread_mutexattr_settype(&attributes, type)
                status = pthread_mutex_init(mutex, &attributes)
                pthread_mutexattr_destroy(&attributes)
            } else {
                status = pthread_mutex_init(mutex, nil)
            }
            precondition(status == 0, "Locked: pthread_mutex_init failed (\(status))")
        }
        return storage
    }

    /// The mutex type that spins before it sleeps, where the C library has one: glibc's
    /// `PTHREAD_MUTEX_ADAPTIVE_NP` (the value 3 of its mutex kinds, not exported to Swift as a name).
    private static var adaptiveType: Int32? {
        #if canImport(Glibc)
            return 3
        #else
            return nil
        #endif
    }

    deinit {
        // The header (the value) is destroyed by ManagedBuffer itself.
        let status = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
        precondition(status == 0, "Locked: pthread_mutex_destroy failed (\(status)): the lock was still held")
    }

    @inline(__always)
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try withUnsafeMutablePointers { value, mutex in
            // Checked in debug builds, where the mutex is error-checking: a lock this thread already
            // holds returns EDEADLK there. A release build's normal mutex has no error to report for a
            // mutex initialised here (a relock would deadlock instead), and the check would cost two
            // instructions on every lock of the hot path.
            let locked = pthread_mutex_lock(mutex)
            assert(locked == 0, "Locked: pthread_mutex_lock failed (\(locked)); a lock taken twice on one thread?")
            defer {
                let unlocked = pthread_mutex_unlock(mutex)
                assert(unlocked == 0, "Locked: pthread_mutex_unlock failed (\(unlocked))")
            }
            return try body(&value.pointee)
        }
    }
}
