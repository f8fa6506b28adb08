import CommandCore
import CommandGraph
import Foundation

/// What a step's command is made with: the run, the step, the attempt, and a key that is the same on
/// every attempt (for an outside service to drop a repeat: an HTTP `Idempotency-Key` header).
public struct StepContext: Sendable {
    /// The run's id (given to `start`).
    public let runID: String
    /// The step's id (given to `step`).
    public let stepID: String
    /// 1 for the first attempt, 2 for the next (a retry, or a run again after its process died), across
    /// processes.
    public let attempt: Int
    /// `"<workflow>/<run id>/<step id>"`: the same on every attempt of this step of this run.
    public let idempotencyKey: String
    /// What the run carries (``DurableRunOptions/context``): a trace's context, a request's id.
    public var runContext: [String: String] = [:]
}

/// When a failed step is tried again.
public enum StepRetry: Sendable {
    /// A failure fails the step (and the run).
    case never
    /// Up to `count` attempts in all (`count` failures fail the step), waiting `backoff` after each
    /// failure; the time of the next attempt is recorded, so a process killed during a wait waits only
    /// the rest of it after resuming. A run again after its process died does not count as a failure.
    case attempts(Int, backoff: RetryDelay = .none)

    /// How many failures the step may have before it fails.
    var allowedFailures: Int {
        switch self {
        case .never: return 1
        case .attempts(let count, _): return max(1, count)
        }
    }

    func delay(afterFailure failure: Int) -> Duration {
        switch self {
        case .never: return .zero
        case .attempts(_, let backoff): return backoff.delay(afterAttempt: failure)
        }
    }
}

/// A step of a workflow, whatever its value: what `step(_:waitingFor:...)` takes.
public protocol DurableStepHandle: Sendable {
    /// The step's id.
    var id: String { get }
    /// Its place in its flow (the order steps were made).
    var index: Int { get }
}

/// A step made by `DurableFlow.step(_:after:retry:_:)`: a handle to pass to later steps (its value is
/// theirs) or to return from `build` (its value is the run's).
public struct DurableStep<Value: Sendable>: DurableStepHandle {
    public let id: String
    public let index: Int
    /// The flow that made it (a step of another flow is refused when used).
    let flow: ObjectIdentifier
}

/// Builds a workflow's steps (the argument of ``DurableWorkflow/build(_:input:)``).
///
/// A step can only come after steps made before it, so a flow has no cycle. Two steps with one id, or
/// a step of another flow, make `build` fail (nothing is recorded) with a ``DurableError``.
public final class DurableFlow: @unchecked Sendable {
    // `@unchecked Sendable`: filled by `build` on one thread, then only read (a flow is not shared
    // while it is being built).
    let workflow: String
    private(set) var steps: [StepDefinition] = []
    private var ids: Set<String> = []
    /// The first mistake `build` made (a duplicate id, a foreign step), thrown after it returns.
    private(set) var mistake: DurableError?

    init(workflow: String) { self.workflow = workflow }

    /// A step whose command is made by `make` once every step in `after` completed, with their values;
    /// its last value is recorded (encoded as JSON) before any step after it starts.
    ///
    /// - Parameters:
    ///   - id: the step's id, unique in the workflow and the same at every `build` of one input.
    ///   - dependencies: the steps it comes after (`after:`); `make` gets their values, in this order.
    ///   - retry: when a failure is tried again (``StepRetry/never`` by default).
    ///   - timeout: an attempt that runs longer is cancelled and counts as a failed attempt (`retry`
    ///     applies; the error recorded is ``DurableError/stepTimedOut(step:after:)``). None by default.
    ///   - queue: the ``DurableQueue`` whose limits its attempts wait for (across every process).
    ///   - key: its key for the queue's `perKey` limit (a user's id: one at a time per user).
    ///   - make: makes the step's command (on the step's queue), for each attempt.
    @discardableResult
    public func step<Output: Codable & Sendable, each Value: Sendable>(
        _ id: String, after dependencies: repeat DurableStep<each Value>, retry: StepRetry = .never,
        timeout: Duration? = nil, queue: DurableQueue? = nil, key: String? = nil,
        _ make: @escaping @Sendable (StepContext, repeat each Value) -> Command<Output>
    ) -> DurableStep<Output> {
        let after = positions(of: repeat each dependencies, for: id)
        let reads = (repeat each dependencies)
        return add(
            id, after: after, retry: retry, timeout: timeout, queue: queue, key: key, codec: .json(Output.self)
        ) { context, values in
            make(context, repeat values.value(of: each reads))
        }
    }

    /// A step whose command sends no value (`Command<Void>`): recorded completed, without a value.
    @discardableResult
    public func step<each Value: Sendable>(
        _ id: String, after dependencies: repeat DurableStep<each Value>, retry: StepRetry = .never,
        timeout: Duration? = nil, queue: DurableQueue? = nil, key: String? = nil,
        _ make: @escaping @Sendable (StepContext, repeat each Value) -> Command<Void>
    ) -> DurableStep<Void> {
        let after = positions(of: repeat each dependencies, for: id)
        let reads = (repeat each dependencies)
        return add(
            id, after: after, retry: retry, timeout: timeout, queue: queue, key: key, codec: .void
        ) { context, values in
            make(context, repeat values.value(of: each reads))
        }
    }

    /// A step whose work is an `async` closure, given the values of the steps in `after:` (in that
    /// order) after the context: `flow.step("fetch", after: id) { context, id async throws -> User in
    /// try await api.user(id) }`. Its value is recorded as for a command's; a throw fails the attempt
    /// (retried by `retry`); cancelling the run cancels the closure's task.
    @discardableResult
    public func step<Output: Codable & Sendable, each Value: Sendable>(
        _ id: String, after dependencies: repeat DurableStep<each Value>, retry: StepRetry = .never,
        timeout: Duration? = nil, queue: DurableQueue? = nil, key: String? = nil,
        _ work: @escaping @Sendable (StepContext, repeat each Value) async throws -> Output
    ) -> DurableStep<Output> {
        let after = positions(of: repeat each dependencies, for: id)
        let reads = (repeat each dependencies)
        return add(
            id, after: after, retry: retry, timeout: timeout, queue: queue, key: key, codec: .json(Output.self)
        ) { context, values in
            let inputs = (repeat values.value(of: each reads))
            return Command { try await work(context, repeat each inputs) }
        }
    }

    /// A step whose `async` work returns nothing: recorded completed, without a value.
    @discardableResult
    public func step<each Value: Sendable>(
        _ id: String, after dependencies: repeat DurableStep<each Value>, retry: StepRetry = .never,
        timeout: Duration? = nil, queue: DurableQueue? = nil, key: String? = nil,
        _ work: @escaping @Sendable (StepContext, repeat each Value) async throws -> Void
    ) -> DurableStep<Void> {
        let after = positions(of: repeat each dependencies, for: id)
        let reads = (repeat each dependencies)
        return add(
            id, after: after, retry: retry, timeout: timeout, queue: queue, key: key, codec: .void
        ) { context, values in
            let inputs = (repeat values.value(of: each reads))
            return Command { try await work(context, repeat each inputs) }
        }
    }

    /// A step that comes after `steps` without taking their values (an order, not a data flow).
    @discardableResult
    public func step<Output: Codable & Sendable>(
        _ id: String, waitingFor steps: [any DurableStepHandle], retry: StepRetry = .never,
        timeout: Duration? = nil, queue: DurableQueue? = nil, key: String? = nil,
        _ make: @escaping @Sendable (StepContext) -> Command<Output>
    ) -> DurableStep<Output> {
        let after = steps.map { check($0, for: id) }
        return add(
            id, after: after, retry: retry, timeout: timeout, queue: queue, key: key, codec: .json(Output.self)
        ) { context, _ in
            make(context)
        }
    }

    /// A step without a value that comes after `steps` without taking their values.
    @discardableResult
    public func step(
        _ id: String, waitingFor steps: [any DurableStepHandle], retry: StepRetry = .never,
        timeout: Duration? = nil, queue: DurableQueue? = nil, key: String? = nil,
        _ make: @escaping @Sendable (StepContext) -> Command<Void>
    ) -> DurableStep<Void> {
        let after = steps.map { check($0, for: id) }
        return add(
            id, after: after, retry: retry, timeout: timeout, queue: queue, key: key, codec: .void
        ) { context, _ in make(context) }
    }

    /// The places of the steps `id` comes after, each checked to be of this flow.
    private func positions<each Value>(of dependencies: repeat DurableStep<each Value>, for id: String) -> [Int] {
        var after: [Int] = []
        for dependency in repeat each dependencies { after.append(check(dependency, for: id)) }
        return after
    }

    private func check(_ step: any DurableStepHandle, for id: String) -> Int {
        let ours = (step as? any FlowOwned)?.flowID == ObjectIdentifier(self)
        if !ours || step.index >= steps.count || steps[step.index].id != step.id {
            note(
                .invalidFlow(
                    workflow: workflow,
                    message: "step '\(id)' comes after '\(step.id)', which is not a step of this flow: "
                        + "make every step with the flow `build` was given"))
        }
        return step.index
    }

    /// A step that waits `duration` once the steps in `waitingFor` completed, then completes (without a
    /// value). The time it ends is recorded when it begins, by the database's clock: a process killed
    /// during the sleep waits only the rest of it once the run goes on, and a resume never starts it over.
    /// No thread waits: a worker claims the step after it only when it is due, and a run started here
    /// waits on a timer. Cancelling the run ends the sleep.
    @discardableResult
    public func sleep(_ id: String, for duration: Duration, waitingFor steps: [any DurableStepHandle] = [])
        -> DurableStep<Void>
    {
        if duration < .zero {
            note(.invalidFlow(workflow: workflow, message: "sleep '\(id)' is for \(duration): give zero or more"))
        }
        return add(id, after: steps.map { check($0, for: id) }, kind: .sleep(.for(duration)), codec: .void)
    }

    /// A step that waits until `date` (recorded when the sleep begins: a `Date()` computed in `build` is
    /// taken from the record at every later `build`, not computed again), then completes. As
    /// ``sleep(_:for:waitingFor:)`` otherwise; a date already past completes at once.
    @discardableResult
    public func sleep(_ id: String, until date: Date, waitingFor steps: [any DurableStepHandle] = [])
        -> DurableStep<Void>
    {
        add(id, after: steps.map { check($0, for: id) }, kind: .sleep(.until(date)), codec: .void)
    }

    /// A step that waits for a value sent to the run from anywhere (``DurableStore/send(_:event:toRun:)``,
    /// in any process or host sharing the store) once the steps in `waitingFor` completed; its value is the
    /// value sent, or nil when `timeout` passed first (from when the wait began; recorded: a value sent
    /// after it is refused with ``DurableError/eventClosed(run:event:)``). A value sent before the wait
    /// began is kept for it (a mailbox); each event step takes one value, read exactly once.
    @discardableResult
    public func event<Value: Codable & Sendable>(
        _ id: String, of type: Value.Type, timeout: Duration? = nil, waitingFor steps: [any DurableStepHandle] = []
    ) -> DurableStep<Value?> {
        if let timeout, timeout < .zero {
            note(
                .invalidFlow(
                    workflow: workflow, message: "event '\(id)' has a timeout of \(timeout): give zero or more"))
        }
        return add(
            id, after: steps.map { check($0, for: id) }, kind: .event(timeout: timeout), codec: .json(Value?.self))
    }

    /// A step whose value is a run of another workflow, its child: recorded as a run of its own, with the id
    /// `"<parent run id>/<step id>"` (``DurableRunRecord/parent`` names the parent), from the input `input`
    /// makes of the values of the steps in `after:`. The child is recorded once however often the parent
    /// resumes, runs as any run (here when the parent was started here, by workers when a worker runs
    /// the parent: register its workflow where it runs), and is cancelled with its parent. The step
    /// completes with the child's value; the child's failure (or its cancel) is the step's failure.
    /// No thread and no worker slot wait for the child.
    @discardableResult
    public func child<W: DurableWorkflow, each Value: Sendable>(
        _ id: String, _ workflow: W.Type, after dependencies: repeat DurableStep<each Value>,
        input: @escaping @Sendable (StepContext, repeat each Value) -> W.Input
    ) -> DurableStep<W.Output> where W.Output: Codable {
        let after = positions(of: repeat each dependencies, for: id)
        let reads = (repeat each dependencies)
        let child = ChildStep(workflow: W.name) { childID, context, values in
            let made = input(context, repeat values.value(of: each reads))
            let plan = try DurableStore.plan(W.self, input: made)
            return NewRun(
                id: childID, workflow: W.name, input: try JSONEncoder().encode(made), plan: plan,
                // The child carries its parent's context (the same trace).
                options: DurableRunOptions(context: context.runContext), parent: (context.runID, context.stepID))
        }
        return add(id, after: after, kind: .child(child), codec: .json(W.Output.self))
    }

    /// A step that is not the user's command (a sleep, an event, a child run): its command is never made.
    private func add<Output: Sendable>(_ id: String, after: [Int], kind: StepKind, codec: StepCodec)
        -> DurableStep<Output>
    {
        add(id, after: after, retry: .never, timeout: nil, queue: nil, key: nil, codec: codec, kind: kind) {
            _, _ -> Command<Output> in
            preconditionFailure("DurableFlow: the command of '\(id)', a \(kind), is never made")
        }
    }

    private func add<Output: Sendable>(
        _ id: String, after: [Int], retry: StepRetry, timeout: Duration?, queue: DurableQueue?, key: String?,
        codec: StepCodec, kind: StepKind = .work, make: @escaping @Sendable (StepContext, StepValues) -> Command<Output>
    ) -> DurableStep<Output> {
        if let reason = queue?.invalidReason {
            note(.invalidFlow(workflow: workflow, message: "step '\(id)': \(reason)"))
        }
        if let timeout, timeout <= .zero {
            note(
                .invalidFlow(
                    workflow: workflow, message: "step '\(id)' has a timeout of \(timeout): give more than zero"))
        }
        if let reason = Self.invalidReason(id) {
            note(.invalidFlow(workflow: workflow, message: "the step id \(String(reflecting: id)) \(reason)"))
        }
        if !ids.insert(id).inserted {
            note(
                .invalidFlow(
                    workflow: workflow,
                    message: "two steps have the id '\(id)': give each step of a workflow its own id"))
        }
        if case .attempts(let count, let backoff) = retry {
            if count < 1 {
                note(
                    .invalidFlow(
                        workflow: workflow, message: "step '\(id)' has .attempts(\(count)); give 1 or more"))
            }
            if let reason = backoff.invalidReason {
                note(.invalidFlow(workflow: workflow, message: "step '\(id)': \(reason)"))
            }
        }
        let index = steps.count
        steps.append(
            StepDefinition(
                id: id, index: index, after: after, retry: retry, codec: codec, kind: kind, timeout: timeout,
                queue: queue, queueKey: key, make: { context, values in StepRun(make(context, values)) }))
        return DurableStep(id: id, index: index, flow: ObjectIdentifier(self))
    }

    /// Why `id` cannot be a step's or a run's id, or nil: a valid id is not empty and holds no NUL (a
    /// database's text ends there) and no `/` (it separates the parts of an idempotency key,
    /// `workflow/run/step`).
    static func invalidReason(_ id: String) -> String? {
        if id.isEmpty { return "is empty: give it a name" }
        if id.contains("\0") { return "contains a NUL character: remove it" }
        if id.contains("/") {
            return "contains '/', which separates the parts of an idempotency key: use another character"
        }
        return nil
    }

    /// Throws ``DurableError/invalidFlow(workflow:message:)`` for a run id that is empty or holds a NUL
    /// (a `/` is allowed in a run's id: a step's id, after it, holds none).
    static func checkRunID(_ id: String, workflow: String) throws {
        if id.isEmpty || id.contains("\0") {
            let reason = id.isEmpty ? "is empty: give it a name" : "contains a NUL character: remove it"
            throw DurableError.invalidFlow(
                workflow: workflow, message: "the run id \(String(reflecting: id)) \(reason)")
        }
    }

    private func note(_ error: DurableError) {
        if mistake == nil { mistake = error }
    }
}

/// A handle that knows the flow that made it.
protocol FlowOwned {
    var flowID: ObjectIdentifier { get }
}

extension DurableStep: FlowOwned {
    var flowID: ObjectIdentifier { flow }
}

/// One step as the engine sees it: its place, its edges, how its value is stored, and how its command
/// is made.
struct StepDefinition: Sendable {
    let id: String
    let index: Int
    let after: [Int]
    let retry: StepRetry
    let codec: StepCodec
    /// The user's command, or a wait of the engine's.
    let kind: StepKind
    /// An attempt running longer is cancelled and fails.
    let timeout: Duration?
    /// The queue whose limits its attempts wait for, and its key there.
    let queue: DurableQueue?
    let queueKey: String?
    /// Makes the attempt's command (type-erased).
    let make: @Sendable (StepContext, StepValues) -> StepRun
}

/// What a step does: the user's command, or a wait the engine keeps in the store (no command runs).
enum StepKind: Sendable, CustomStringConvertible {
    case work
    case sleep(SleepSpan)
    /// Waits for a value sent to the run; nil after `timeout`.
    case event(timeout: Duration?)
    /// Records a child run and waits for its end.
    case child(ChildStep)

    enum SleepSpan: Sendable {
        case `for`(Duration)
        case until(Date)
    }

    var description: String {
        switch self {
        case .work: return "step"
        case .sleep: return "sleep"
        case .event: return "event"
        case .child: return "child run"
        }
    }
}

/// A child run's step: the child's workflow, and the run to record (given its id) from the parent step's
/// context and values.
struct ChildStep: Sendable {
    let workflow: String
    let record: @Sendable (_ id: String, StepContext, StepValues) throws -> NewRun
}

/// How a step's value is stored: JSON of a `Codable` value, or nothing for `Void`.
struct StepCodec: Sendable {
    /// The value's encoding; nil for a step without a value.
    let encode: @Sendable (any Sendable) throws -> Data?
    let decode: @Sendable (Data?) throws -> any Sendable

    static func json<Value: Codable & Sendable>(_: Value.Type) -> StepCodec {
        StepCodec(
            encode: { value in
                guard let value = value as? Value else {
                    throw EncodingError.invalidValue(
                        value, .init(codingPath: [], debugDescription: "not a \(Value.self)"))
                }
                return try JSONEncoder().encode(value)
            },
            decode: { data in
                guard let data else {
                    throw DecodingError.valueNotFound(
                        Value.self, .init(codingPath: [], debugDescription: "no value was recorded"))
                }
                return try JSONDecoder().decode(Value.self, from: data)
            })
    }

    static let void = StepCodec(encode: { _ in nil }, decode: { _ in () })
}

/// The values of a run's completed steps, read by the steps after them.
final class StepValues: Sendable {
    // Guards the values by step index.
    private let values = Locked<[Int: any Sendable]>([:])

    func set(_ value: any Sendable, at index: Int) { values.withLock { $0[index] = value } }

    func value(at index: Int) -> (any Sendable)? { values.withLock { $0[index] } }

    func value<Value>(of step: DurableStep<Value>) -> Value {
        guard let value = values.withLock({ $0[step.index] }) as? Value else {
            preconditionFailure("DurableFlow: step '\(step.id)' ran before the value of a step it comes after")
        }
        return value
    }
}
