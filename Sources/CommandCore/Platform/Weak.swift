/// A weak reference in a box that can be shared across threads: an edge kept for pictures (a
/// combinator's inputs), a callback object held weakly, a timer's target, a queue's own registration.
/// (``WeakNode``, a struct in a list its command's lock guards, is the one weak reference kept inline.)
final class Weak<Object: AnyObject & Sendable>: Sendable {
    // Written once in init, only read afterwards (the runtime's weak loads are thread-safe); not
    // `weak let`, which needs Swift 6.2.3.
    nonisolated(unsafe) weak var object: Object?
    init(_ object: Object) { self.object = object }
}
