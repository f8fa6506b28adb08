import CommandCore
import Foundation

/// What a combinator sends downstream, queued in decision order.
enum Emission<Output: Sendable>: Sendable {
    case value(Output)
    /// A value computed when it is sent, outside every lock (a user's `reduce`); a throw fails the node.
    case computed(@Sendable () throws -> Output)
    case completed
    case failed(any Error)
    case cancelled(CommandError)
}

/// The plumbing every combinator node shares: its result sink, its subscriptions to its inputs, and
/// an outbox that keeps emissions in the order its state machine decided them.
///
/// Inputs deliver on their own threads, possibly at the same time. A combinator decides what to emit
/// under its state machine's lock and queues it here (``enqueue(_:)``, a leaf lock, allowed inside
/// the state machine's lock); after unlocking it calls ``flush()``, which sends the queued emissions
/// one drainer at a time, in order, with no lock held (a send may deliver `.immediate`ly downstream).
/// Before a terminal emission is sent every subscription is cancelled: an input no other consumer
/// needs is cancelled with it.
final class Link<Output: Sendable>: Cancelable {
    private struct Outbox {
        var queue: [Emission<Output>] = []
        var draining = false
        var ended = false
    }

    let result: CommandResult<Output>
    let node: String
    private let subscriptions = CompoundCancelable()
    // Guards the queued emissions and the drainer flag.
    private let outbox = Locked(Outbox())

    init(_ result: CommandResult<Output>, node: String) {
        self.result = result
        self.node = node
    }

    /// Observes `input` (executing it) until this node ends or is cancelled.
    func subscribe<Input>(_ input: Command<Input>, _ handler: @escaping @Sendable (CommandEvent<Input>) -> Void) {
        subscriptions.add(input.subscribe(handler))
    }

    /// Observes `input` with its values handed over as they are (no event per value) and its terminal
    /// event to `terminal`: the fast path of single-input operators.
    func subscribe<Input>(
        _ input: Command<Input>, value: @escaping @Sendable (Input) -> Void,
        terminal: @escaping @Sendable (CommandEvent<Input>) -> Void
    ) {
        subscriptions.add(input.subscribe(value: value, terminal: terminal))
    }

    /// Observes `input`, a command chosen while this node runs (`then { }`, `flatMap`, `catch`,
    /// `retry`), recording it as the node's run-time input for pictures and stall reports.
    func subscribe<Input>(runTime input: Command<Input>, _ handler: @escaping @Sendable (CommandEvent<Input>) -> Void) {
        result.command.recordRunTimeInput(input)
        subscriptions.add(input.subscribe(handler))
    }

    /// Observes `input`, a command chosen while this node runs, with its values handed over as they are
    /// (no event per value) and its terminal event to `terminal`; the subscription is let go of once
    /// `input` ended (an endless `flatMap` holds only the inner commands still running). Recorded as
    /// a run-time input like ``subscribe(runTime:_:)``.
    func subscribe<Input>(
        runTime input: Command<Input>, value: @escaping @Sendable (Input) -> Void,
        terminal: @escaping @Sendable (CommandEvent<Input>) -> Void
    ) {
        result.command.recordRunTimeInput(input)
        // The token, once `subscribe` returned it; `ended`: the terminal event came first.
        let slot = Locked<(token: (any Cancelable)?, ended: Bool)>((nil, false))
        let token = input.subscribe(value: value) { [subscriptions] event in
            terminal(event)
            if let token = slot.withLock({ slot -> (any Cancelable)? in
                slot.ended = true
                defer { slot.token = nil }
                return slot.token
            }) {
                subscriptions.remove(token)
            }
        }
        // An inner that had ended already (its terminal event replayed during `subscribe`) is not held.
        if slot.withLock({ $0.ended }) { return }
        // Held before it is published in the slot, so a terminal event on another thread right now
        // removes it, or finds it not published and leaves the removal to this thread.
        subscriptions.add(token)
        let ended = slot.withLock { slot -> Bool in
            if !slot.ended { slot.token = token }
            return slot.ended
        }
        if ended { subscriptions.remove(token) }
    }

    /// Keeps a subscription until this node ends or is cancelled.
    func add(_ subscription: any Cancelable) { subscriptions.add(subscription) }

    /// Runs `action` on `scheduler` after `delay`, unless this node ends first; the timer is held
    /// only until it fires.
    func schedule(on scheduler: any CommandScheduler, after delay: Duration, _ action: @escaping @Sendable () -> Void) {
        let slot = Locked<(any Cancelable)?>(nil)
        let token = scheduler.schedule(after: delay) { [self] in
            if let token = slot.withLock({ $0 }) { subscriptions.remove(token) }
            action()
        }
        slot.withLock { $0 = token }
        subscriptions.add(token)
    }

    /// Queues an emission; call it under the state machine's lock, then `flush()` after unlocking.
    func enqueue(_ emission: Emission<Output>) {
        outbox.withLock { outbox in
            if outbox.ended { return }
            switch emission {
            case .value, .computed: break
            case .completed, .failed, .cancelled: outbox.ended = true
            }
            outbox.queue.append(emission)
        }
    }

    /// Sends what was queued, in order; returns at once if another thread is already sending (that
    /// thread picks up what was queued meanwhile before it stops).
    func flush() {
        var batch = outbox.withLock { outbox -> [Emission<Output>] in
            if outbox.draining || outbox.queue.isEmpty { return [] }
            outbox.draining = true
            defer { outbox.queue.removeAll(keepingCapacity: true) }
            return outbox.queue
        }
        while !batch.isEmpty {
            for emission in batch { perform(emission) }
            batch = outbox.withLock { outbox -> [Emission<Output>] in
                if outbox.queue.isEmpty {
                    outbox.draining = false
                    return []
                }
                defer { outbox.queue.removeAll(keepingCapacity: true) }
                return outbox.queue
            }
        }
    }

    /// Sends a value straight to the node's result, with no outbox: for single-input operators, whose
    /// input delivers one event at a time and which emit nothing from anywhere else (so their order
    /// is the input's), and for `merge`, whose order is arrival order. A value after the node ended is
    /// dropped quietly.
    func send(_ value: Output) { result.forward(value) }

    /// Completes the node; out of line, so a value path that may complete (a zip) does not fetch
    /// `Emission<Output>`'s metadata for every value.
    @inline(never)
    func complete() { emit(.completed) }

    /// Fails the node (a throwing closure); out of line, so a value path that may throw does not
    /// fetch `Emission<Output>`'s metadata for every value.
    @inline(never)
    func fail(_ error: any Error) { emit(.failed(error)) }

    /// Emits directly; for single-input operators, whose input's deliveries are already serialised.
    func emit(_ emission: Emission<Output>) {
        enqueue(emission)
        flush()
    }

    private func perform(_ emission: Emission<Output>) {
        switch emission {
        case .value(let value):
            result.send(value)
        case .computed(let compute):
            do { result.send(try compute()) } catch {
                outbox.withLock { $0.queue.removeAll() }
                subscriptions.cancel()
                result.fail(error)
            }
        // Inputs are released (and cancelled if nobody else needs them) before the terminal event is
        // sent, so an observer of the terminal event already sees them cancelled.
        case .completed:
            subscriptions.cancel()
            result.complete()
        case .failed(let error):
            subscriptions.cancel()
            result.fail(error)
        case .cancelled(let error):
            subscriptions.cancel()
            result.cancel(error)
        }
    }

    /// The error a node reports when its input `input` was cancelled.
    func inputCancelled(_ input: String) -> CommandError {
        CommandError(
            code: .dependencyCancelled, command: node,
            message: "'\(node)' ended because its input '\(input)' was cancelled.", dependency: input)
    }

    /// The run's cancelable: the node was cancelled, so its subscriptions go.
    func cancel() { subscriptions.cancel() }

    var isCancelled: Bool { subscriptions.isCancelled }
}

extension Command {
    /// Makes a combinator node named `name`: a command whose run gives `body` a ``Link`` to subscribe
    /// to `inputs` and emit through. The node keeps `inputs` alive until it ends.
    static func combinator(
        _ name: String, inputs: [Operation], _ body: @escaping @Sendable (Link<Output>) -> Void
    ) -> Command<Output> {
        let node = Command<Output> { result in
            let link = Link(result, node: name)
            body(link)
            return link
        }
        node.name = name
        node.retain(inputs: inputs)
        node.runsInPlace()
        // A node may carry an endless stream: it keeps only its latest value for a late observer
        // (memory stays flat), unless the user asks for more.
        node.replay = .latest
        return node
    }
}
