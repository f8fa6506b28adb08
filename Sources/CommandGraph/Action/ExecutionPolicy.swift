/// What a ``CommandAction`` does when executed while earlier executions are still running.
public enum ExecutionPolicy: Sendable, Equatable {
    /// Refuse: the new execution fails with `CommandError/Code/notEnabled` (RACCommand's default).
    case reject
    /// Run up to `max` at once; refuse beyond.
    case concurrent(max: Int)
    /// Cancel the running executions and run the new one (latest wins).
    case cancelPrevious
    /// Run one at a time, in the order of `execute` calls; later ones wait (never dropped).
    case enqueue
}
