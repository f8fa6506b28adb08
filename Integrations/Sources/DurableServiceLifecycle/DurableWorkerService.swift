// swift-service-lifecycle: a DurableWorker as a `Service` of a ServiceGroup, drained on graceful
// shutdown (SIGTERM with the group's `gracefulShutdownSignals`). One file: copy it into your target, or
// depend on `DurableServiceLifecycle`.
//
//     let group = ServiceGroup(configuration: .init(
//         services: [.init(service: DurableWorkerService(store: store, concurrency: 8))],
//         gracefulShutdownSignals: [.sigterm], logger: logger))
//     try await group.run()
import CommandDurable
import ServiceLifecycle

/// Runs a ``DurableWorker`` on `store` while the service runs: `run()` starts it, then waits for the
/// group's graceful shutdown (or the task's cancel); then the worker claims nothing more and `run()`
/// returns once the steps it was running ended and were recorded (``DurableWorker/stop()``). A step
/// still running at a hard stop (the process killed) is taken over by another worker once its lease
/// expires, as after any crash.
public struct DurableWorkerService: Service {
    public let store: DurableStore
    public let concurrency: Int

    public init(store: DurableStore, concurrency: Int = 4) {
        self.store = store
        self.concurrency = concurrency
    }

    public func run() async throws {
        let worker = try store.work(concurrency: concurrency)
        // Until the graceful shutdown (or a cancel); neither is an error here.
        try? await gracefulShutdown()
        await worker.stop()
    }
}
