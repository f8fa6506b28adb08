import Foundation

/// At most `count` starts in any window of `period` (a sliding window, by the database's clock).
public struct DurableRate: Sendable, Equatable {
    public let count: Int
    public let period: Duration

    public init(_ count: Int, per period: Duration) {
        self.count = count
        self.period = period
    }
}

/// Limits on the steps that name it (`flow.step(..., queue: .mail, key: user)`), held across every
/// process sharing the store: at most `concurrency` of its steps running at once, at most `perKey` of
/// them with one key, at most `rate` starts. Each limit is enforced in the claim's transaction (the
/// queue's row locked on a server, so two processes never both take the last place), not by each process
/// counting its own.
///
/// ```swift
/// extension DurableQueue {
///     static let mail = DurableQueue("mail", concurrency: 10, perKey: 1, rate: DurableRate(5, per: .seconds(1)))
/// }
/// ```
///
/// **One queue, two declarations.** The limits a store enforces are those recorded last: each run
/// recorded with a step on the queue records the queue's limits as its process declares them. Two
/// processes declaring one queue differently therefore take turns: deploy a change of limits to every
/// process (or give the changed queue a new name). A step waiting for its place holds no worker slot.
public struct DurableQueue: Sendable, Equatable {
    /// The queue's name, shared by every process and workflow that uses it.
    public let name: String
    /// Its steps running at once, at most (nil: no limit).
    public let concurrency: Int?
    /// Its steps of one key running at once, at most (nil: no limit).
    public let perKey: Int?
    public let rate: DurableRate?

    public init(_ name: String, concurrency: Int? = nil, perKey: Int? = nil, rate: DurableRate? = nil) {
        self.name = name
        self.concurrency = concurrency
        self.perKey = perKey
        self.rate = rate
    }

    /// Why this queue cannot be used, or nil.
    var invalidReason: String? {
        if name.isEmpty || name.contains("\0") { return "a queue's name is empty or holds a NUL: name it" }
        if let concurrency, concurrency < 1 { return "queue '\(name)' has concurrency \(concurrency): give 1 or more" }
        if let perKey, perKey < 1 { return "queue '\(name)' has perKey \(perKey): give 1 or more" }
        if let rate, rate.count < 1 || rate.period <= .zero {
            return
                "queue '\(name)' has a rate of \(rate.count) per \(rate.period): give 1 or more per a positive period"
        }
        return nil
    }
}
