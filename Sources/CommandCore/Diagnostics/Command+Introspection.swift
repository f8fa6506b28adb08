import Foundation

// What test tools and leak checks see of a command, whatever its output type.
extension Command {
    /// Calls `callback` when this command is released (from its `deinit`, on the releasing thread):
    /// what leak checks wait for, instead of polling weak references.
    package func onRelease(_ callback: @escaping @Sendable () -> Void) {
        machine.withLock { $0.releaseCallbacks.append(callback) }
    }
}
