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
struct ThreadLocal<Value: AnyObject>: @unchecked Sendable {
    // `@unchecked Sendable`: the key is immutable; each value is only reached from its own thread.
    private let key: pthread_key_t
    private let make: () -> Value

    init(_ make: @escaping () -> Value) {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
                Unmanaged<AnyObject>.fromOpaque(pointer).release()
            #else
                if let pointer { Unmanaged<AnyObject>.fromOpaque(pointer).release() }
            #endif
        }
        precondition(status == 0, "ThreadLocal: pthread_key_create failed (\(status))")
        self.key = key
        self.make = make
    }

    /// This thread's instance.
    var current: Value {
        if let pointer = pthread_getspecific(key) { return Unmanaged<Value>.fromOpaque(pointer).takeUnretainedValue() }
        let value = make()
        pthread_setspecific(key, Unmanaged.passRetained(value).toOpaque())
        return value
    }
}
