import Foundation

// The second readiness count: the one for a command in an `OperationQueue` of yours.
//
// The engine's own count is the state machine's (`Lifecycle.waiting(remaining:)`, in
// `CommandStateMachine+Dependencies.swift`): it decides when the engine hands a command it executed to
// its queue, and counts a dependency as done when the dependency *ended*. A queue of yours needs another
// answer: `isReady` must stay false until every dependency *published* `isFinished` (Foundation's
// rule; a command ends before it posts `isFinished`). So a command a queue asked about (`isReady`
// is the first read, `readiness()` in `OperationFace/`) counts its unfinished dependencies in
// `OperationFace` (`unfinishedDependencies`): a command dependency tells it when it publishes
// `isFinished` (`addFaceWatcher` / `faceDependencyDidFinish`), a plain `Operation` is watched by a
// `PlainOperationWatcher`. Foundation's own dependency count is never used for this (it writes a
// stale `isReady` into its queue's cache from the finishing thread and can strand a ready command);
// only edges the queue adds itself (a barrier) reach it, through `super.isReady`. A graph the engine
// runs by itself never starts this count (tracking stays `.off`).
extension Command {
    /// The first `isReady`: registers with every unfinished dependency (a command tells this one when
    /// it publishes `isFinished`; a plain operation is watched), then publishes the answer. False if
    /// another thread started.
    func startTrackingReadiness() -> Bool {
        let dependencies = machine.withLock { machine -> [Operation]? in
            guard machine.face.tracking == .off else { return nil }
            machine.face.tracking = .registering
            return machine.dependencies.array
        }
        guard let dependencies else { return false }
        for operation in dependencies { watchForReadiness(operation, node: operation as? CommandNode) }
        var ready = false
        var gateDue = false
        publish(.ready) { face in
            face.tracking = .on
            face.dependenciesFinished = face.readinessTarget
            ready = face.isReady
            gateDue = face.dependenciesFinished && !face.gateOpen
        }
        // Another reader may have been told `false` while this one registered.
        if ready { repostReadiness() }
        if gateDue { openGateForQueue() }
        return true
    }

    /// Counts `operation` as unfinished until it finishes: a command tells this one when it publishes
    /// `isFinished`; a plain operation is watched by a ``PlainOperationWatcher``. Readiness never goes
    /// through Foundation's own dependency count: Foundation posts `isReady` from the thread that
    /// finished a dependency and writes the answer into its queue's cache unconditionally, so a
    /// `false` read a moment earlier could overwrite a newer `true` and strand a ready command.
    private func watchForReadiness(_ operation: Operation, node: CommandNode?) {
        if let node {
            machine.withLock { $0.face.dependencyAdded() }
            if !node.addFaceWatcher(self) { machine.withLock { $0.face.dependencyGone() } }
            return
        }
        let id = ObjectIdentifier(operation)
        guard machine.withLock({ $0.face.addPlainDependency(id) }) else { return }
        PlainOperationWatcher.watch(operation) { [weak self] in self?.plainDependencyDidFinish(id) }
    }

    private func plainDependencyDidFinish(_ id: ObjectIdentifier) {
        if machine.withLock({ $0.face.plainDependencyGone(id) }) { publishReadiness() }
    }

    /// Records `operation` as a dependency for readiness, once readiness is tracked (see
    /// `watchForReadiness`).
    func trackReadiness(of operation: Operation, node: CommandNode?) {
        guard machine.withLock({ $0.face.tracking != .off }) else { return }
        watchForReadiness(operation, node: node)
        publishReadiness()
    }

    /// Forgets `operation` for readiness (an edge removed before executing).
    func untrackReadiness(of operation: Operation) {
        guard machine.withLock({ $0.face.tracking != .off }) else { return }
        if let node = operation as? CommandNode {
            if node.removeFaceWatcher(self) { machine.withLock { $0.face.dependencyGone() } }
        } else {
            // Its watcher, when it fires, finds the edge gone.
            _ = machine.withLock { $0.face.plainDependencyGone(ObjectIdentifier(operation)) }
        }
        publishReadiness()
    }

    /// ``CommandNode/faceDependencyDidFinish()``.
    func faceDependencyEnded() {
        machine.withLock { $0.face.dependencyGone() }
        publishReadiness()
    }
}
