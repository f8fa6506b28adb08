import Foundation

// What test tools and leak checks see of a command, whatever its output type.
extension Command {
    /// Calls `callback` when this command is released (from its `deinit`, on the releasing thread):
    /// what leak checks wait for, instead of polling weak references.
    package func onRelease(_ callback: @escaping @Sendable () -> Void) {
        machine.withLock { $0.releaseCallbacks.append(callback) }
    }
}

/// A command seen by test tools whatever its output type: its release can be awaited and its held
/// commands walked.
package protocol TrackableCommand: AnyObject {
    func onRelease(_ callback: @escaping @Sendable () -> Void)
    var heldCommands: [Operation] { get }
    /// A combinator's inputs (not its dependencies).
    var inputCommands: [Operation] { get }
    /// The commands a combinator subscribed to while running, still alive.
    var runTimeInputs: [Operation] { get }
    var dependencies: [Operation] { get }
    var displayName: String { get }
    var state: CommandState { get }
    var timing: CommandTiming { get }
    /// The mutually exclusive categories of its conditions, sorted.
    var mutuallyExclusiveCategories: [String] { get }
    /// Its gate's phase (nil without conditions): "evaluating", "waitingForCategories", ...
    var gatePhase: String? { get }
    /// Who holds the categories it waits for.
    var categoryHolders: [(category: String, holder: String, since: UInt64)] { get }
}

extension Command: TrackableCommand {}
