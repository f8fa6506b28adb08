internal import CommandAtomics

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#else
    #error("AwesomeCommand needs Glibc, Musl or Darwin (a POSIX C library) for its locks and threads")
#endif

/// One instance of `Value` per thread, made on first use and released when the thread exits.
/// Only its own thread touches it, so it needs no lock.
///
/// The pthread key owns the value (released at the thread's exit); the first few `ThreadLocal`s made
/// also cache it in a C11 `_Thread_local` slot (`CommandAtomics`), which is read on every value a
/// stage delivers: one load instead of a `pthread_getspecific` call and a retain.
struct ThreadLocal<Value: AnyObject>: @unchecked Sendable {
    // `@unchecked Sendable`: the key and the slot are immutable; each value is only reached from its
    // own thread.
    private let key: pthread_key_t
    /// The fast slot's index; nil when every slot was taken.
    private let slot: Int32?
    private let make: () -> Value

    /// `slot`: a fast slot kept for this instance (`COMMAND_DELIVERIES_SLOT`); by default the next
    /// free one, if any.
    init(slot reserved: Int32? = nil, _ make: @escaping () -> Value) {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            // The thread is exiting: its cached pointer goes first (a later use makes a new value).
            #if canImport(Darwin)
                command_thread_slots_clear(pointer)
                Unmanaged<AnyObject>.fromOpaque(pointer).release()
            #else
                if let pointer {
                    command_thread_slots_clear(pointer)
                    Unmanaged<AnyObject>.fromOpaque(pointer).release()
                }
            #endif
        }
        precondition(status == 0, "ThreadLocal: pthread_key_create failed (\(status))")
        self.key = key
        let slot = reserved ?? command_thread_slot_reserve()
        self.slot = slot < COMMAND_THREAD_SLOT_COUNT ? slot : nil
        self.make = make
    }

    /// This thread's instance.
    @inline(__always)
    var current: Value { unretained.takeUnretainedValue() }

    /// This thread's instance, not retained: it lives until the thread exits. For a path that must
    /// not pay a retain and a release (use it with `_withUnsafeGuaranteedRef`).
    @inline(__always)
    var unretained: Unmanaged<Value> {
        if let slot, let pointer = command_thread_slot_get(slot) { return Unmanaged<Value>.fromOpaque(pointer) }
        return Unmanaged.passUnretained(made)
    }

    /// This thread's instance from its pthread key, made on first use, and cached in the slot.
    @inline(never)
    private var made: Value {
        if let pointer = pthread_getspecific(key) {
            if let slot { command_thread_slot_set(slot, pointer) }
            return Unmanaged<Value>.fromOpaque(pointer).takeUnretainedValue()
        }
        let value = make()
        let pointer = Unmanaged.passRetained(value).toOpaque()
        pthread_setspecific(key, pointer)
        if let slot { command_thread_slot_set(slot, pointer) }
        return value
    }
}
