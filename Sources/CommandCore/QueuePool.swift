import Foundation

/// Idle `OperationQueue`s kept for reuse: making one costs about 2 us and a backing `DispatchQueue`;
/// a command's own queue is handed back here when the command ends and given to the next command
/// that becomes ready. A queue serves one command at a time, so every command still runs on its own
/// queue. Only plain queues are pooled (no underlying queue); at most `limit` per quality of service.
enum QueuePool {
    private static let limit = 256
    // Guards the idle queues, by quality of service.
    private static let idle = Locked<[Int: [OperationQueue]]>([:])

    static func take(_ qualityOfService: QualityOfService) -> OperationQueue? {
        idle.withLock { $0[qualityOfService.rawValue]?.popLast() }
    }

    static func recycle(_ queue: OperationQueue, named: Bool) {
        if named { queue.name = nil }
        let qos = queue.qualityOfService.rawValue
        idle.withLock { idle in
            if idle[qos, default: []].count < limit { idle[qos, default: []].append(queue) }
        }
    }
}
