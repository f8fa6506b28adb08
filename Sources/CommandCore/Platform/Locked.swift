#if canImport(Glibc)
    import Glibc
    internal import CommandAtomics
#elseif canImport(Musl)
    import Musl
    internal import CommandAtomics
#elseif canImport(Darwin)
    import Darwin
#else
    #error("AwesomeCommand needs Glibc, Musl or Darwin (a POSIX C library) for its locks and threads")
#endif

/// A value guarded by a lock, both in one allocation (a `ManagedBuffer`).
///
/// The lock: on Apple platforms `os_unfair_lock`; on Linux a 4-byte futex lock (`CommandAtomics`:
/// one compare-and-swap to take it and one exchange to release it when nobody waits). A glibc
/// `pthread_mutex_t` was 40 bytes in every command's allocation and about 55 instructions a lock
/// round (callgrind); the futex lock is 8 bytes with its debug owner and about 15.
///
/// Why not `Synchronization.Mutex`: it needs macOS 15 / iOS 18, and on Linux its atomics are
/// compiled into the standard library, where ThreadSanitizer does not see them, so TSan reported
/// every access it guards as a race. The futex lock's atomics are compiled with this package, so a
/// TSan build of it sees them and a clean TSan run means something.
///
/// Never call user code, or take another command's lock, inside `withLock`. Debug builds check that a
/// thread does not take a lock it already holds (a deadlock in release) and stop there with a
/// message; every build checks that a lock is not held when it is destroyed.
package struct Locked<Value>: @unchecked Sendable {
    // `@unchecked Sendable`: the value is only reached through `withLock`, under the lock.
    private let storage: LockStorage<Value>

    package init(_ value: Value) { storage = LockStorage.make(value) }

    /// A lock many threads take for short moments (a process-wide book): on Linux a thread that finds
    /// it held spins briefly before it sleeps, so one held for a few hundred instructions costs no
    /// futex sleep and wake; on Apple platforms, the same `os_unfair_lock`.
    package init(contended value: Value) { storage = LockStorage.make(value, contended: true) }

    @inline(__always)
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withLock(body)
    }
}

#if canImport(Darwin)
    /// The lock word of ``LockStorage``.
    typealias LockWord = os_unfair_lock_s
#else
    /// The lock word of ``LockStorage``: the futex word; the lock's kind (contended or not) and the
    /// holder's thread id (debug builds). See `CommandAtomics.h`.
    struct LockWord {
        var state: UInt32 = 0
        var kindAndOwner: UInt32 = 0
    }
#endif

/// The allocation behind ``Locked``: the value as header, the lock as the single element.
final class LockStorage<Value>: ManagedBuffer<Value, LockWord> {
    static func make(_ value: Value, contended: Bool = false) -> LockStorage<Value> {
        let buffer = LockStorage<Value>.create(minimumCapacity: 1) { _ in value }
        let storage = unsafeDowncast(buffer, to: LockStorage<Value>.self)
        storage.withUnsafeMutablePointerToElements { word in
            #if canImport(Darwin)
                word.initialize(to: os_unfair_lock_s())
            #else
                word.initialize(to: LockWord(kindAndOwner: contended ? COMMAND_LOCK_CONTENDED : 0))
            #endif
        }
        return storage
    }

    deinit {
        // The header (the value) is destroyed by ManagedBuffer itself.
        let held = withUnsafeMutablePointerToElements { word in
            #if canImport(Darwin)
                guard os_unfair_lock_trylock(word) else { return true }
                os_unfair_lock_unlock(word)
                return false
            #else
                return command_lock_is_held(Self.words(word)) != 0
            #endif
        }
        precondition(!held, "Locked: a lock was destroyed while held")
    }

    #if !canImport(Darwin)
        /// The lock's two words, as `CommandAtomics` reads them.
        @inline(__always)
        private static func words(_ word: UnsafeMutablePointer<LockWord>) -> UnsafeMutablePointer<UInt32> {
            UnsafeMutableRawPointer(word).assumingMemoryBound(to: UInt32.self)
        }
    #endif

    @inline(__always)
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try withUnsafeMutablePointers { value, word in
            #if canImport(Darwin)
                #if DEBUG
                    os_unfair_lock_assert_not_owner(word)
                #endif
                os_unfair_lock_lock(word)
                defer { os_unfair_lock_unlock(word) }
            #else
                #if DEBUG
                    // A lock this thread holds would never be released: stop with a message instead.
                    let me = command_thread_id()
                    precondition(
                        command_lock_owner(Self.words(word)) != me,
                        "Locked: a lock taken twice on one thread (a deadlock)")
                #endif
                command_lock_lock(Self.words(word))
                #if DEBUG
                    command_lock_set_owner(Self.words(word), me)
                #endif
                defer {
                    #if DEBUG
                        command_lock_set_owner(Self.words(word), 0)
                    #endif
                    command_lock_unlock(Self.words(word))
                }
            #endif
            return try body(&value.pointee)
        }
    }
}
