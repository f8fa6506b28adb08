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

/// The values of one run, addressed by absolute index (0 for the first value ever sent), with the
/// oldest ones dropped as the replay policy allows.
///
/// - Complexity: `append`, `value(at:)` and `trim(below:)` are amortised O(1).
struct ValueLog<Output: Sendable>: Sendable {
    private var storage: [Output] = []
    /// Index in `storage` of the oldest kept value.
    private var head = 0
    /// Absolute index of the oldest kept value.
    private(set) var startIndex = 0

    /// Absolute index one past the newest value.
    @inline(__always)
    var endIndex: Int { startIndex + storage.count - head }

    @inline(__always)
    var isEmpty: Bool { storage.count == head }

    @inline(__always)
    mutating func append(_ value: Output) {
        storage.append(value)
    }

    @inline(__always)
    func value(at index: Int) -> Output {
        precondition(
            index >= startIndex && index < endIndex, "ValueLog: index \(index) outside \(startIndex)..<\(endIndex)")
        return storage[head + index - startIndex]
    }

    /// Drops every value whose absolute index is below `index`.
    @inline(__always)
    mutating func trim(below index: Int) {
        let drop = min(index, endIndex) - startIndex
        guard drop > 0 else { return }
        head += drop
        startIndex += drop
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.count <= 64)
            head = 0
        } else if head >= 64 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
    }
}
