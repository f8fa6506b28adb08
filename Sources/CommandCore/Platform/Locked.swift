#if canImport(Glibc)
    import Glibc
    internal import CommandAtomics
#elseif canImport(Musl)
    import Musl
    internal import CommandAtomics
#elseif canImport(Darwin)
    import Darwin
    internal import CommandAtomics
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
        try storage.withLock { value, _ in try body(&value) }
    }

    /// `withLock`, with the lock's in-place claim word (see ``ClaimWord``).
    @inline(__always)
    func withLockAndClaimWord<Result>(_ body: (inout Value, ClaimWord) throws -> Result) rethrows -> Result {
        try storage.withLock(body)
    }

    /// ``withLockAndClaimWord(_:)`` without a closure: takes the lock and returns the value's address,
    /// valid until ``release()``, which the caller must call on every path, with no user code or other
    /// lock in between. Only for a body that must be compiled into its caller (a command's send,
    /// where the closure was a function of its own: a call, and registers saved around it).
    @inline(__always)
    func acquire() -> (value: UnsafeMutablePointer<Value>, word: ClaimWord) { storage.acquire() }

    @inline(__always)
    func release() { storage.release() }

    /// The in-place claim word beside the lock, for a claim's release without the lock.
    @inline(__always)
    var claimWord: ClaimWord { storage.withUnsafeMutablePointerToElements { LockWord.claimWord($0) } }
}

/// Bits beside a command's lock that a thread may read or write without taking it: the in-place claim,
/// released without the lock by the one thread that delivers a value in place (a single atomic
/// fetch-and-subtract where a second lock round was: see `CommandStateMachine.settleInPlaceClaim(_:)`),
/// and the command's end, set under the lock as it ends and read without it where a run's result is
/// released. A pointer into the lock's allocation, valid while its ``Locked`` lives; tests of the
/// state machine point it at a word of their own.
struct ClaimWord {
    let word: UnsafeMutablePointer<UInt32>

    /// No claim outstanding (claimed nor poked).
    @inline(__always)
    var isFree: Bool { command_claim_load(word) == 0 }
    /// A claim was made and not released or poked since.
    @inline(__always)
    var isClaimed: Bool { command_claim_load(word) == COMMAND_CLAIM_CLAIMED }

    /// Under the lock, with none outstanding: claims.
    @inline(__always)
    func claim() { command_claim_set(word) }

    /// Under the lock: pokes the claim; false if its thread had released it already (the word is then
    /// cleared).
    @inline(__always)
    func poke() -> Bool {
        if command_claim_poke(word) & COMMAND_CLAIM_CLAIMED != 0 { return true }
        command_claim_clear(word)
        return false
    }

    /// Under the lock, by the delivering thread after a poke: no claim outstanding any more.
    @inline(__always)
    func clear() { command_claim_clear(word) }

    /// Without the lock, by the delivering thread: true when released; false when it was poked (take
    /// the lock, ``clear()`` and look).
    @inline(__always)
    func release() -> Bool { command_claim_release(word) != 0 }

    /// Under the lock, as the command ends (once).
    @inline(__always)
    func markEnded() { command_claim_mark_ended(word) }

    /// The command ended (``markEnded()``), seen without the lock.
    @inline(__always)
    var hasEnded: Bool { command_claim_ended(word) != 0 }
}

#if canImport(Darwin)
    /// The lock word of ``LockStorage``: the lock, and the in-place claim word (``ClaimWord``).
    struct LockWord {
        var lock = os_unfair_lock_s()
        var claim: UInt32 = 0
    }
#else
    /// The lock word of ``LockStorage``: the futex word; the lock's kind (contended or not), the
    /// in-place claim bits (``ClaimWord``) and the holder's thread id (debug builds). See
    /// `CommandAtomics.h`.
    struct LockWord {
        var state: UInt32 = 0
        var kindAndOwner: UInt32 = 0
    }
#endif

extension LockWord {
    /// A new lock word, released; `contended`: see ``Locked/init(contended:)``.
    static func make(contended: Bool) -> LockWord {
        #if canImport(Darwin)
            LockWord()
        #else
            LockWord(kindAndOwner: contended ? COMMAND_LOCK_CONTENDED : 0)
        #endif
    }

    #if canImport(Darwin)
        /// The lock itself.
        @inline(__always)
        private static func lock(_ word: UnsafeMutablePointer<LockWord>) -> UnsafeMutablePointer<os_unfair_lock_s> {
            UnsafeMutableRawPointer(word).assumingMemoryBound(to: os_unfair_lock_s.self)
        }

        /// The in-place claim word.
        @inline(__always)
        static func claimWord(_ word: UnsafeMutablePointer<LockWord>) -> ClaimWord {
            ClaimWord(word: (UnsafeMutableRawPointer(word) + 4).assumingMemoryBound(to: UInt32.self))
        }
    #else
        /// The lock's two words, as `CommandAtomics` reads them.
        @inline(__always)
        private static func words(_ word: UnsafeMutablePointer<LockWord>) -> UnsafeMutablePointer<UInt32> {
            UnsafeMutableRawPointer(word).assumingMemoryBound(to: UInt32.self)
        }

        /// The in-place claim word: the lock's second word, whose claim bits are its own.
        @inline(__always)
        static func claimWord(_ word: UnsafeMutablePointer<LockWord>) -> ClaimWord {
            ClaimWord(word: words(word) + 1)
        }
    #endif

    /// Takes the lock (debug builds stop with a message when this thread holds it already).
    @inline(__always)
    static func lock(at word: UnsafeMutablePointer<LockWord>) {
        #if canImport(Darwin)
            #if DEBUG
                os_unfair_lock_assert_not_owner(lock(word))
            #endif
            os_unfair_lock_lock(lock(word))
        #else
            #if DEBUG
                // A lock this thread holds would never be released: stop with a message instead.
                let me = command_thread_id()
                precondition(
                    command_lock_owner(words(word)) != me, "Locked: a lock taken twice on one thread (a deadlock)")
            #endif
            command_lock_lock(words(word))
            #if DEBUG
                command_lock_set_owner(words(word), me)
            #endif
        #endif
    }

    /// Releases the lock ``lock(at:)`` took.
    @inline(__always)
    static func unlock(at word: UnsafeMutablePointer<LockWord>) {
        #if canImport(Darwin)
            os_unfair_lock_unlock(lock(word))
        #else
            #if DEBUG
                command_lock_set_owner(words(word), 0)
            #endif
            command_lock_unlock(words(word))
        #endif
    }

    /// Stops the process if the lock is held: it is about to be destroyed.
    static func checkNotHeld(at word: UnsafeMutablePointer<LockWord>) {
        #if canImport(Darwin)
            let held = !os_unfair_lock_trylock(lock(word))
            if !held { os_unfair_lock_unlock(lock(word)) }
        #else
            let held = command_lock_is_held(words(word)) != 0
        #endif
        precondition(!held, "Locked: a lock was destroyed while held")
    }
}

/// The allocation behind ``Locked``: the value as header, the lock as the single element.
final class LockStorage<Value>: ManagedBuffer<Value, LockWord> {
    static func make(_ value: Value, contended: Bool = false) -> LockStorage<Value> {
        let buffer = LockStorage<Value>.create(minimumCapacity: 1) { _ in value }
        let storage = unsafeDowncast(buffer, to: LockStorage<Value>.self)
        storage.withUnsafeMutablePointerToElements { $0.initialize(to: LockWord.make(contended: contended)) }
        return storage
    }

    deinit {
        // The header (the value) is destroyed by ManagedBuffer itself.
        withUnsafeMutablePointerToElements { LockWord.checkNotHeld(at: $0) }
    }

    @inline(__always)
    func withLock<Result>(_ body: (inout Value, ClaimWord) throws -> Result) rethrows -> Result {
        let (value, word) = acquire()
        defer { release() }
        return try body(&value.pointee, word)
    }

    /// Takes the lock; the value's address is valid until ``release()`` (the storage is kept alive by
    /// the caller's ``Locked``). For `withLock`, and for the one caller whose body must be compiled
    /// into it rather than as a closure of its own (a command's send: see `Command.receive`).
    @inline(__always)
    func acquire() -> (value: UnsafeMutablePointer<Value>, word: ClaimWord) {
        withUnsafeMutablePointers { value, word in
            LockWord.lock(at: word)
            return (value, LockWord.claimWord(word))
        }
    }

    /// Releases the lock ``acquire()`` took.
    @inline(__always)
    func release() { withUnsafeMutablePointerToElements { LockWord.unlock(at: $0) } }
}

/// A value and its lock in one allocation with no object header: the lock word, then the value (16
/// bytes fewer than a ``Locked``, whose `ManagedBuffer` is an object: a command's state and lock are a
/// 272-byte block instead of 288). Owned by one object, which never copies it out and calls
/// ``destroy()`` in its `deinit` (a command's `machine`); the same calls as ``Locked`` otherwise.
struct OwnedLocked<Value>: @unchecked Sendable {
    // `@unchecked Sendable`: the value is only reached through `withLock` / `acquire`, under the lock.
    private let word: UnsafeMutablePointer<LockWord>

    /// Where the value starts: after the lock word, aligned for the value.
    private static var valueOffset: Int {
        let alignment = MemoryLayout<Value>.alignment
        return (MemoryLayout<LockWord>.size + alignment - 1) / alignment * alignment
    }

    init(_ value: Value) {
        let raw = UnsafeMutableRawPointer.allocate(
            byteCount: Self.valueOffset + MemoryLayout<Value>.size,
            alignment: max(MemoryLayout<LockWord>.alignment, MemoryLayout<Value>.alignment))
        word = raw.initializeMemory(as: LockWord.self, repeating: LockWord.make(contended: false), count: 1)
        (raw + Self.valueOffset).initializeMemory(as: Value.self, repeating: value, count: 1)
    }

    @inline(__always)
    private var value: UnsafeMutablePointer<Value> {
        (UnsafeMutableRawPointer(word) + Self.valueOffset).assumingMemoryBound(to: Value.self)
    }

    /// Destroys the value and frees the allocation: by the owner's `deinit`, once (stops the process if
    /// the lock is held).
    func destroy() {
        LockWord.checkNotHeld(at: word)
        value.deinitialize(count: 1)
        word.deinitialize(count: 1)
        UnsafeMutableRawPointer(word).deallocate()
    }

    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try withLockAndClaimWord { value, _ in try body(&value) }
    }

    /// See ``Locked/withLockAndClaimWord(_:)``.
    @inline(__always)
    func withLockAndClaimWord<Result>(_ body: (inout Value, ClaimWord) throws -> Result) rethrows -> Result {
        let (value, word) = acquire()
        defer { release() }
        return try body(&value.pointee, word)
    }

    /// See ``Locked/acquire()``.
    @inline(__always)
    func acquire() -> (value: UnsafeMutablePointer<Value>, word: ClaimWord) {
        LockWord.lock(at: word)
        return (value, LockWord.claimWord(word))
    }

    @inline(__always)
    func release() { LockWord.unlock(at: word) }

    /// See ``Locked/claimWord``.
    @inline(__always)
    var claimWord: ClaimWord { LockWord.claimWord(word) }
}
