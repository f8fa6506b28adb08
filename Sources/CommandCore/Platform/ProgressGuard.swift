import Foundation

/// Every change to the library's `Foundation.Progress` objects, in one place, and the lock around
/// them where the platform needs it (see `Platform.withProgressLock`).
///
/// **Never called with a command's (or a graph's) lock held.** On Apple platforms `Progress` notifies
/// its KVO observers synchronously on the changing thread, parents included (a `Graph`'s progress):
/// an observer that reads a command's `fractionCompleted` or `state`, or cancels it, takes that
/// command's lock, and would deadlock on a change made under it. `scripts/check-progress.py` (in
/// CI) checks that no `Progress` is changed outside this file, and that none of these functions is
/// called from a state machine or inside a `withLock` body.
package enum ProgressGuard {
    /// Reads (or changes) progress objects under the platform's progress lock.
    package static func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        try Platform.withProgressLock(body)
    }

    /// Reports `completed` of `total` units, `completed` clamped to `0...total`. A total of 0 or less
    /// (an empty batch, a count not known yet) is indeterminate, as Apple's `Progress` reads 0 of 0:
    /// the report leaves the progress as it was (Foundation on Linux traps when a total changes to 0,
    /// and a negative total leaves its fraction stuck at 0 afterwards).
    static func report(_ progress: Progress, completed: Int64, of total: Int64) {
        guard total > 0 else { return }
        withLock {
            progress.totalUnitCount = total
            progress.completedUnitCount = min(max(completed, 0), total)
        }
    }

    /// Completes `progress` when its command ended, whatever the outcome.
    static func complete(_ progress: Progress) {
        withLock {
            if progress.completedUnitCount < progress.totalUnitCount {
                progress.completedUnitCount = progress.totalUnitCount
            }
        }
    }

    /// Adds `child` to `parent` with `weight` units of the parent's total.
    package static func addChild(_ child: Progress, to parent: Progress, weight: Int64) {
        withLock {
            parent.totalUnitCount += weight
            parent.addChild(child, withPendingUnitCount: weight)
        }
    }

    /// Completes a parent whose children all weigh 0 (nothing moved it) once its work ended.
    package static func completeIfWeightless(_ progress: Progress) {
        withLock {
            if progress.totalUnitCount == 0 {
                progress.totalUnitCount = 1
                progress.completedUnitCount = 1
            }
        }
    }
}
