import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#else
    #error("AwesomeCommand needs Glibc, Musl or Darwin (a POSIX C library) for its locks and threads")
#endif

// The platform layer of `CommandCore`: every `#if canImport` / `#if os` of this module is in this folder
// (the lock, the thread-local storage, and the few things below), so the rest of its code is the same
// everywhere. Each other module that needs one has a `Platform/` folder of its own.
// The Darwin branches cannot be compiled on the Linux machine this library is developed on: they are
// few and short, each tied to the Apple documentation it follows.

enum Platform {
    /// Runs `block` on `loop`'s thread, in `mode`, and wakes the loop.
    ///
    /// - Darwin: `RunLoop` is documented as not thread-safe; Core Foundation's `CFRunLoopPerformBlock`
    ///   followed by `CFRunLoopWakeUp` is the documented way to hand a block to another thread's run
    ///   loop (Apple, "CFRunLoopPerformBlock": "this function does not wake up the run loop ... call
    ///   CFRunLoopWakeUp").
    /// - Elsewhere (swift-corelibs-foundation): `RunLoop.perform` does not wake the loop; a zero-interval
    ///   timer both queues the block and wakes it.
    static func perform(on loop: RunLoop, mode: RunLoop.Mode, _ block: @escaping @Sendable () -> Void) {
        #if canImport(Darwin)
            let runLoop = loop.getCFRunLoop()
            CFRunLoopPerformBlock(runLoop, mode.rawValue as CFString, block)
            CFRunLoopWakeUp(runLoop)
        #else
            let timer = Timer(timeInterval: 0, repeats: false) { _ in block() }
            loop.add(timer, forMode: mode)
        #endif
    }

    /// Whether `isExecuting` turning false is posted as a KVO pair. Apple's KVO has observers (a
    /// queue, the user's own), so yes. swift-corelibs-foundation has no user KVO, and its `Operation`
    /// acts on an `isExecuting` change only when the value is true (it advances its own state); the
    /// pair for false reads the flag, takes Foundation's lock and does nothing else (about 1,500
    /// instructions per command under callgrind), so it is not posted there. `isFinished`,
    /// `isReady`, `isCancelled` and `isExecuting` turning true are posted everywhere.
    static var postsExecutingEnd: Bool {
        #if canImport(Darwin)
            return true
        #else
            return false
        #endif
    }

    /// Serialises the library's own reads and writes of `Foundation.Progress` where it needs it.
    ///
    /// - Linux: swift-corelibs-foundation's `Progress` has no locking at all (checked in its source): a
    ///   child updating its parent from two threads at once corrupts the heap, so every change and read
    ///   goes through one lock.
    /// - Darwin: `Progress` is thread-safe (Apple, "Progress": "Progress is thread-safe") and notifies
    ///   its KVO observers on the thread that changes it: taking a lock here would run those observers
    ///   inside it, and one that reads `fractionCompleted` would deadlock. No lock.
    ///
    /// Re-entrant on one thread: a body that reads a graph's `progress` for the first time (which
    /// adopts the commands' progress under this lock) does not deadlock with itself.
    static func withProgressLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        #if canImport(Darwin)
            try body()
        #else
            let depth = progressLockDepth.current
            if depth.value > 0 { return try body() }
            return try progressLock.withLock { _ in
                depth.value += 1
                defer { depth.value -= 1 }
                return try body()
            }
        #endif
    }

    /// How many `withProgressLock` calls this thread is inside (only this thread touches it).
    private final class Depth {
        var value = 0
    }
    private static let progressLockDepth = ThreadLocal { Depth() }

    // An `Int`, not `()`: a zero-sized value would share its address with the mutex in the lock's
    // storage, which ThreadSanitizer then reports as a race on the mutex itself.
    private static let progressLock = Locked(0)
}
