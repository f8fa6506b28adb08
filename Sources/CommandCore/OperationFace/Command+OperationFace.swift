import Foundation

// The face Foundation sees: `isReady`, the KVO pairs, and readiness for a user's queue (`start()` is
// in `Start/`).
// Every `willChangeValue(forKey:)` / `didChangeValue(forKey:)` of the library is in `publish(_:_:)`.

extension Command {
    /// Posts `keys` as KVO pairs around `apply`: every `willChangeValue(forKey:)`, then the published
    /// flags change (under the command's lock), then every `didChangeValue(forKey:)` in the same
    /// order, `isFinished` last. Never called with the lock held: Foundation reads the flags back
    /// synchronously from `didChangeValue` (and on Linux a queue schedules its next operation there).
    ///
    /// The only place in the library that posts KVO (`scripts/check-kvo.sh` checks it).
    func publish(_ keys: FaceKeys, _ apply: (inout OperationFace) -> Void) {
        keys.forEachName { willChangeValue(forKey: $0) }
        machine.withLock { apply(&$0.face) }
        keys.forEachName { didChangeValue(forKey: $0) }
    }

    /// Publishes what an ending changed: `isCancelled` (and `isReady`, which a cancel makes true),
    /// `isExecuting` if it was running, `isFinished` if something had started it; then tells the
    /// dependents waiting for `isFinished` in a user's queue.
    /// (Given the three facts it needs, not the whole ``Ending``: capturing that in the closures here
    /// copied it, nine retains and releases a command.)
    func publishEnd(cancelled: Bool, wasExecuting: Bool, postFinished: Bool) {
        var keys: FaceKeys = []
        if cancelled {
            keys.insert(.cancelled)
            if !machine.withLock({ $0.face.isReady }) { keys.insert(.ready) }
        }
        if wasExecuting && Platform.postsExecutingEnd { keys.insert(.executing) }
        if postFinished { keys.insert(.finished) }
        if keys.isEmpty {
            if wasExecuting { machine.withLock { $0.face.executing = false } }
            return
        }
        publish(keys) { face in
            if cancelled { face.cancelled = true }
            if wasExecuting { face.executing = false }
            if postFinished { face.finished = true }
        }
        if postFinished { tellWatchers() }
        if keys.contains(.ready) && machine.withLock({ $0.face.tracking == .on }) { repostReadiness() }
    }

    /// `isFinished` turns true for a command that had ended before anything started it.
    func publishFinished() {
        publish(.finished) { $0.finished = true }
        tellWatchers()
    }

    private func tellWatchers() {
        let watchers = machine.withLock { $0.face.takeWatchers() }
        for watcher in watchers { watcher.node?.faceDependencyDidFinish() }
    }

    /// Publishes `isReady` if the command dependencies' state changed what it should be.
    func publishReadiness() {
        let stale = machine.withLock {
            $0.face.tracking == .on && $0.face.readinessTarget != $0.face.dependenciesFinished
        }
        guard stale else { return }
        var ready = false
        var gateDue = false
        publish(.ready) { face in
            face.dependenciesFinished = face.readinessTarget
            ready = face.isReady
            gateDue = face.dependenciesFinished && !face.gateOpen
        }
        if ready { repostReadiness() }
        if gateDue { openGateForQueue() }
    }

    /// Posts the `isReady` pair again, after a hop, and again with a short backoff until something
    /// started the command or it finished. Foundation's `OperationQueue` reads a new operation's
    /// `isReady` before it adopts the operation; a change posted in between reaches no queue, and the
    /// queue keeps the stale `false` until something else makes it look again (a race of Foundation's
    /// own, plain operations included, and of Apple's queue: ProcedureKit #755/#756; on Linux it can
    /// leave a ready operation waiting forever). A single repost could land before the adoption too;
    /// these land at about 0, 1, 4, 16, 64 and 256 ms, then stop (a queue that is suspended, or full,
    /// reads `isReady` again by itself when it resumes or a slot frees). Only for a command whose
    /// readiness is tracked (one a queue of yours holds).
    func repostReadiness(attempt: Int = 0) {
        let again: @Sendable () -> Void = { [self] in
            let waiting = machine.withLock {
                !$0.startedExternally && !$0.face.finished && !$0.face.executing && $0.face.tracking == .on
            }
            guard waiting else { return }
            publish(.ready) { _ in }
            if attempt < Self.repostBackoff.count - 1 { repostReadiness(attempt: attempt + 1) }
        }
        let delay = Self.repostBackoff[attempt]
        if delay == 0 {
            DispatchQueue.global().async(execute: again)
        } else {
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(delay), execute: again)
        }
    }

    /// The delays of the `isReady` reposts, in milliseconds.
    private static var repostBackoff: [Int] { [0, 1, 4, 16, 64, 256] }

    /// `isReady`: cancelled, or every dependency finished; and, in a queue of the user's, Foundation's
    /// own answer (`super.isReady`), as Apple asks of an override.
    ///
    /// Foundation keeps edges of its own there: `addOperation` after `addBarrierBlock` makes the
    /// pending barrier a dependency of the new operation (under the queue's lock) and reads `isReady`
    /// to decide whether to schedule it right there. Answering `true` then made the queue schedule
    /// inside its own lock (a hang on Linux, a trap under `os_unfair_lock` on Apple platforms), and
    /// ran the command before the barrier. A command's own edges never reach `super` (its
    /// `addDependency` keeps them), so `super.isReady` is false only for such an edge of the queue's,
    /// and turns true, with a KVO post from Foundation, when the barrier ran. A cancelled command
    /// behind a barrier waits for it too.
    func readiness() -> Bool {
        let (cancelled, tracking, commandsDone, engineQueued) = machine.withLock {
            (
                $0.face.cancelled, $0.face.tracking, $0.face.dependenciesFinished && $0.face.gateOpen,
                $0.queue.holder != nil
            )
        }
        // In the engine's own queue, which Foundation asks when it is added: the engine made it ready
        // (and no barrier is ever added to that queue).
        if engineQueued { return true }
        let own: Bool
        if cancelled {
            own = true
        } else {
            switch tracking {
            case .off:
                if !startTrackingReadiness() { return readiness() }
                own = machine.withLock { $0.face.isReady }
            case .registering:
                // Another thread is registering; it posts a KVO pair when done.
                own = false
            case .on:
                own = commandsDone
            }
        }
        return own && super.isReady
    }
}
