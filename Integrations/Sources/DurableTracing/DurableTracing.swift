// swift-distributed-tracing for durable runs: the caller's trace context recorded with the run, and a
// span per step attempt, on whichever process or host runs it, in the caller's trace. One file: copy it
// into your target, or depend on `DurableTracing`.
//
//     // where the run is started (a request handler, inside its span):
//     let run = try await store.enqueue(Upload.self, id: id, input: input,
//                                       options: DurableRunOptions(context: DurableTracing.currentContext()))
//     // in every process that runs steps:
//     let tracing = DurableTracingObserver()
//     store.add(observer: tracing)        // held weakly: keep `tracing`
import CommandDurable
import Foundation
import Tracing

/// The trace context of a task, as a run carries it (``DurableRunOptions/context``).
public enum DurableTracing {
    /// The current task's service context (its span's) injected by the bootstrapped instrument (W3C
    /// `traceparent` with swift-otel, for example), ready for ``DurableRunOptions/context``.
    public static func currentContext(
        _ context: ServiceContext = .current ?? .topLevel, tracer: any Tracer = InstrumentationSystem.tracer
    ) -> [String: String] {
        var carrier: [String: String] = [:]
        tracer.inject(context, into: &carrier, using: DictionaryInjector())
        return carrier
    }

    struct DictionaryInjector: Injector {
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
            carrier[key] = value
        }
    }

    struct DictionaryExtractor: Extractor {
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    }
}

/// A span per step attempt run in this process (`"<workflow>/<step>"`, kind `internal`), a child of the
/// trace context its run carries (so a worker on another host continues the caller's trace): started at
/// `stepStarted`, ended at the attempt's end, with the error recorded and the status `error` for a failed
/// or retrying attempt. Attributes: `durable.run`, `durable.step`, `durable.attempt`, `durable.owner`.
///
/// Called on the store's observers' queue, in order (its spans are kept under a lock until they end).
public final class DurableTracingObserver: DurableObserver, @unchecked Sendable {
    // `@unchecked Sendable`: the open spans are guarded by `lock`; the tracer is immutable.
    private let tracer: any Tracer
    private let lock = NSLock()
    private var open: [String: any Span] = [:]

    public init(tracer: any Tracer = InstrumentationSystem.tracer) { self.tracer = tracer }

    public func store(_ store: DurableStore, observed change: DurableChange) {
        guard let step = change.step, let attempt = change.attempt else { return }
        let key = "\(change.run)\u{0}\(step)\u{0}\(attempt)"
        switch change.kind {
        case .stepStarted:
            var parent = ServiceContext.topLevel
            if let carried = change.context {
                tracer.extract(carried, into: &parent, using: DurableTracing.DictionaryExtractor())
            }
            let span = tracer.startSpan("\(change.workflow)/\(step)", context: parent, ofKind: .internal)
            span.attributes["durable.run"] = change.run
            span.attributes["durable.step"] = step
            span.attributes["durable.attempt"] = attempt
            span.attributes["durable.owner"] = change.owner
            lock.withLock { open[key] = span }
        case .stepCompleted, .stepFailed, .stepRetrying:
            guard let span = lock.withLock({ open.removeValue(forKey: key) }) else { return }
            if change.kind != .stepCompleted {
                span.recordError(StepError(description: change.error ?? "failed"))
                span.setStatus(SpanStatus(code: .error, message: change.error))
            }
            span.end()
        case .runCreated, .runEnded, .stepTakenOver:
            break
        }
    }

    /// A step's error as a span records it.
    struct StepError: Error, CustomStringConvertible {
        let description: String
    }
}
