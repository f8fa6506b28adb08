/// Which of its values a command keeps for observers that attach later (a second `execute`).
///
/// Values not yet delivered to a live observer are always kept, whatever the policy; the policy says
/// what is kept beyond that. The terminal event is always kept.
public enum ReplayPolicy: Sendable, Equatable {
    /// Every value sent: a late observer sees the whole run. The default for a command you write
    /// (`Command { }` or a subclass), because it runs once and executing it again means "show me what
    /// it did"; choose another for long streams.
    ///
    /// A combinator node of `CommandGraph` (`map`, `merge`, `flatMap`...) defaults to ``latest``
    /// instead: it may carry an endless stream (`subject.map { }`), and with `.all` its memory would
    /// grow with every value. Its observers attached when it was executed get every value anyway (it
    /// is wired before `execute` returns); only an observer attaching later gets just the latest value
    /// and the terminal event. Set `replay = .all` on the node to keep everything.
    case all
    /// The last value sent, like a `RACReplaySubject` of capacity 1 or a current-value subject.
    case latest
    /// Nothing: a late observer sees only the values sent after it attached, and the terminal event.
    case none
}
