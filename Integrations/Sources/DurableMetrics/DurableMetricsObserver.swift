// DurableObserver -> swift-metrics: counters and timers of the steps this process runs. One file: copy
// it into your target, or depend on `DurableMetrics`.
//
//     let metrics = DurableMetricsObserver()
//     store.add(observer: metrics)        // held weakly: keep `metrics`
import CommandDurable
import Metrics

/// Records, from the changes a store's observer hears (``DurableObserver``: the steps this process runs):
///
/// - `durable.steps` (counter), dimensions `workflow`, `step`, `outcome`: one per attempt that ended,
///   `outcome` `completed`, `failed` (for good) or `retrying` (it will be tried again);
/// - `durable.step.duration` (timer), the same dimensions: how long each attempt ran;
/// - `durable.step.queued` (timer), dimensions `workflow`, `step`: how long a run's entry steps waited from
///   the run's record to their first start (a worker's backlog);
/// - `durable.runs` (counter), dimensions `workflow`, `outcome` (`completed`, `failed`, `cancelled`): runs
///   ended that this process ran or awaited.
///
/// Called on the store's observers' queue, in order; the metrics backend (`MetricsSystem.bootstrap`)
/// decides where they go.
public final class DurableMetricsObserver: DurableObserver {
    /// Names prefixed by `prefix` (default `durable`).
    public let prefix: String
    /// Where the metrics go (default: the bootstrapped `MetricsSystem`'s).
    public let factory: any MetricsFactory

    public init(prefix: String = "durable", factory: any MetricsFactory = MetricsSystem.factory) {
        self.prefix = prefix
        self.factory = factory
    }

    public func store(_ store: DurableStore, observed change: DurableChange) {
        let step = change.step ?? ""
        switch change.kind {
        case .stepCompleted, .stepFailed, .stepRetrying:
            let outcome =
                change.kind == .stepCompleted ? "completed" : change.kind == .stepFailed ? "failed" : "retrying"
            let dimensions = [("workflow", change.workflow), ("step", step), ("outcome", outcome)]
            Counter(label: "\(prefix).steps", dimensions: dimensions, factory: factory).increment()
            if let duration = change.duration {
                Timer(label: "\(prefix).step.duration", dimensions: dimensions, factory: factory).record(
                    duration: duration)
            }
        case .stepStarted:
            if let queued = change.queued {
                Timer(
                    label: "\(prefix).step.queued", dimensions: [("workflow", change.workflow), ("step", step)],
                    factory: factory
                ).record(duration: queued)
            }
        case .runEnded:
            Counter(
                label: "\(prefix).runs",
                dimensions: [("workflow", change.workflow), ("outcome", change.state?.rawValue ?? "ended")],
                factory: factory
            ).increment()
        case .runCreated, .stepTakenOver:
            break
        }
    }
}
