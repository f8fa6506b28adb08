import Foundation

/// How a run is started or enqueued: when it may begin, when it must have ended, which runs go first,
/// and the tags it is found and cancelled by.
///
/// ```swift
/// let run = try await store.start(Onboarding.self, id: "onboarding-42", input: .init(user: "42"),
///                                 options: DurableRunOptions(notBefore: Date().addingTimeInterval(60),
///                                                            deadline: .seconds(7 * 86_400), tags: ["user:42"]))
/// ```
///
/// Each is recorded with the run, by the database's clock, and holds in every process sharing the store,
/// across restarts.
public struct DurableRunOptions: Sendable, Equatable {
    /// Nothing of the run begins before this date (no worker claims its steps; a run started here waits).
    public var notBefore: Date?
    /// How long the run may take, from when it is recorded (absolute once recorded: a restart does not
    /// start it again). When it passes, the run's running steps are cancelled, its steps not begun never
    /// run, and it ends `failed` with ``DurableError/deadlineExceeded(run:)``, also when it passes while
    /// no process is running: the first store to look ends it.
    public var deadline: Duration?
    /// Among ready steps of all runs, a worker claims those of higher priority first (then the oldest
    /// run's first). Default 0.
    public var priority: Int
    /// Tags to find runs by (``DurableRunFilter/tagged(_:)``) and cancel them by
    /// (``DurableStore/cancel(matching:)``). A tag is not empty and holds no comma.
    public var tags: Set<String>
    /// Names and values carried with the run, for what follows it across processes and hosts: a trace's
    /// context (W3C `traceparent`), a request's id. Given to its steps (``StepContext/runContext``), to its
    /// child runs, and to observers (``DurableChange/context`` of `runCreated` and `stepStarted`). At most
    /// 4,096 bytes as JSON.
    public var context: [String: String]

    public init(
        notBefore: Date? = nil, deadline: Duration? = nil, priority: Int = 0, tags: Set<String> = [],
        context: [String: String] = [:]
    ) {
        self.notBefore = notBefore
        self.deadline = deadline
        self.priority = priority
        self.tags = tags
        self.context = context
    }

    /// A run as it has always been started: at once, no deadline, priority 0, no tags.
    public static let none = DurableRunOptions()

    /// Why these options cannot be recorded, or nil.
    var invalidReason: String? {
        if let tag = tags.first(where: { $0.isEmpty || $0.contains(",") || $0.contains("\0") }) {
            return "the tag \(String(reflecting: tag)) is empty or holds a comma or a NUL: give tags without them"
        }
        if let recorded = recordedContext, recorded.utf8.count > 4_096 {
            return "the context takes \(recorded.utf8.count) bytes as JSON, more than 4,096: carry less"
        }
        if let deadline, deadline <= .zero {
            return "the deadline \(deadline) is not after the start: give a positive one"
        }
        return nil
    }

    /// The context as recorded: JSON, or nil when empty.
    var recordedContext: String? {
        guard !context.isEmpty else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(context)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A recorded context read back.
    static func context(recorded: String?) -> [String: String] {
        guard let recorded else { return [:] }
        return (try? JSONDecoder().decode([String: String].self, from: Data(recorded.utf8))) ?? [:]
    }

    /// Recorded tags (`,a,b,`) read back.
    static func tags(recorded: String?) -> Set<String> {
        Set((recorded ?? "").split(separator: ",").map(String.init))
    }

    /// The tags as recorded: `,a,b,` (sorted), or empty.
    var recordedTags: String { tags.isEmpty ? "" : "," + tags.sorted().joined(separator: ",") + "," }
}
