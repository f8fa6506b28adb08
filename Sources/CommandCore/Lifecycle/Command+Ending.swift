import Foundation

// A terminal event from the result sink, and what an ending does once the command's lock is released.
extension Command {
    func receiveTerminal(_ outcome: Termination, event: @autoclosure () -> String) {
        guard let ending = machine.withLock({ $0.finish(outcome, word: $1) }) else {
            if !machine.withLock({ $0.isCancelled }) {
                diagnose(.alreadyFinished, "\(event()) was called after the terminal event; it is ignored.")
            }
            return
        }
        perform(ending)
    }

    func receiveSuccess(_ value: Output) {
        guard let ending = machine.withLock({ $0.succeed(value, word: $1) }) else {
            if !machine.withLock({ $0.isCancelled }) {
                diagnose(.alreadyFinished, "succeed(\(value)) was called after the terminal event; it is ignored.")
            }
            return
        }
        perform(ending)
    }

    /// Everything an ending does after the lock was released.
    func perform(_ ending: Ending) {
        if let propagation = performLocally(ending) { propagate(propagation) }
    }

    /// Tells a graph or group that this command ended, through the delivery trampoline as an observer
    /// would be: a group whose next child ends inside this call (a combinator child, run in place)
    /// nests within ``Trampoline/nestingBudget`` bytes of stack, then queues, so a sequential group of 10,000
    /// such children does not grow the stack by 10,000 levels.
    private func tell(_ watch: EndWatch, _ state: CommandState) {
        let queue = Trampoline.deliveriesQueue
        if Trampoline.mayDeliverNow(queue) {
            Trampoline.deliverNow(on: queue) { watch.ended(self, state) }
        } else {
            Trampoline.deliveries.run { [self] in watch.ended(self, state) }
        }
    }

    /// An ending's effects on this command; returns what its dependents must be told.
    func performLocally(_ ending: Ending) -> Propagation? {
        if CommandLogging.isOn { CommandLogging.ended(displayName, ending.outcome) }
        // The run's closure goes with the end (see `body`: nothing reads it once the command ended).
        body = nil
        // Before `isFinished` and before any dependent is told: nothing can start because of it yet.
        if !ending.observers.isEmpty {
            let state = ending.outcome.state
            for observer in ending.observers { observer.willFinish(self, state: state) }
        }
        // Through the cancel trampoline: a combinator's cancelable cancels its inputs, whose endings
        // cancel theirs; queued instead of nested, a 10,000-stage chain cancels at constant depth.
        if let cancelable = ending.cancelable as? any Cancelable { Trampoline.cancels.run { cancelable.cancel() } }
        if let progress = ending.progress { ProgressGuard.complete(progress) }
        if let gate = ending.gate { gate.cancelEvaluation() }
        // A user's queue may hold the only other reference, and lets it go when `isFinished` is posted.
        // Before the observers' hops: a terminal callback reads `isCancelled` and `isFinished` as
        // published (scheduling the hops first woke a callback that read `isCancelled` false).
        let (cancelled, wasExecuting, postFinished) = (
            ending.outcome.isCancelled, ending.wasExecuting, ending.postFinished
        )
        withExtendedLifetime(self) {
            publishEnd(cancelled: cancelled, wasExecuting: wasExecuting, postFinished: postFinished)
        }
        schedule(ending.wakeups)
        if let watch = ending.endWatch { tell(watch, ending.outcome.state) }
        if !ending.observers.isEmpty {
            let state = ending.outcome.state
            for observer in ending.observers { observer.didFinish(self, state: state) }
        }
        let recycled = machine.withLock { machine -> (OperationQueue, Bool)? in
            if machine.queue.borrowed {
                machine.queue.executeQueue = nil
                machine.queue.borrowed = false
            }
            guard machine.queue.ownsQueue, let queue = machine.queue.executeQueue else { return nil }
            machine.queue.executeQueue = nil
            return machine.queue.pooled && machine.queue.underlying == nil ? (queue, machine.name != nil) : nil
        }
        if let (queue, named) = recycled { QueuePool.recycle(queue, named: named, finishing: self) }
        // After the queue went back: the command granted its categories may take that lane and run next
        // on this thread, without a hop (a line of exclusive commands runs on one thread).
        if let gate = ending.gate { gate.release(lane: true) }
        if !ending.inputs.isEmpty {
            var inputs = ending.inputs
            DeferredRelease.release(&inputs)
        }
        if ending.dependents.isEmpty { return nil }
        return Propagation(outcome: ending.outcome, source: self, dependents: ending.dependents)
    }
}
