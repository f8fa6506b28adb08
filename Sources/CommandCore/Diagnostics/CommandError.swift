/// The errors this library reports itself, each naming the command it concerns and saying what to do.
///
/// The ``code`` is an open set (a struct with static members, like swift-service-lifecycle's errors), so
/// new codes can be added without breaking a `switch`. Compare codes with `==`:
///
/// ```swift
/// if let error = error as? CommandError, error.code == .dependencyFailed { ... }
/// ```
public struct CommandError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable identifier of the code.
        public let rawValue: String

        private init(_ rawValue: String) { self.rawValue = rawValue }

        /// The command was cancelled (by `cancel()`, its token or a released ``CancelBag``).
        public static let cancelled = Code("cancelled")
        /// A dependency failed, so the command did not run.
        public static let dependencyFailed = Code("dependencyFailed")
        /// A dependency was cancelled, so the command did not run.
        public static let dependencyCancelled = Code("dependencyCancelled")
        /// The command completed without sending a value where one was required.
        public static let noValue = Code("noValue")
        /// An event was sent, or a change made, after the command had already finished.
        public static let alreadyFinished = Code("alreadyFinished")
        /// The dependencies form a cycle; ``CommandError/cycle`` lists it.
        public static let dependencyCycle = Code("dependencyCycle")
        /// A command was made to depend on itself.
        public static let selfDependency = Code("selfDependency")
        /// A dependency was added after the command had been handed to its queue.
        public static let dependencyAddedAfterStart = Code("dependencyAddedAfterStart")
        /// Something else was changed too late: a condition, an injection, the `dependencyPolicy`, a
        /// removed dependency or the `executeQueue` after the command was handed to its queue or began
        /// its checks, or a `Graph` added to or run after it ran. The change is ignored.
        public static let changedAfterStart = Code("changedAfterStart")
        /// A child of a group failed, so the group failed: ``CommandError/dependency`` names the child,
        /// ``CommandError/underlying`` is its error.
        public static let childFailed = Code("childFailed")
        /// `run` released its ``CommandResult`` without sending a terminal event.
        public static let resultAbandoned = Code("resultAbandoned")
        /// `Command` was used without overriding `run(_:)` and without a body closure.
        public static let missingRun = Code("missingRun")
        /// A deadline passed (`timeout`).
        public static let timedOut = Code("timedOut")
        /// A `CommandAction` refused an execution (disabled, or busy under its policy).
        public static let notEnabled = Code("notEnabled")
        /// An argument out of range (a negative retry count, a timeout that is not positive).
        public static let invalidArgument = Code("invalidArgument")
        /// A condition of the command was false or threw, so the command did not run;
        /// ``CommandError/condition`` names it, ``CommandError/underlying`` is what it threw.
        public static let conditionFailed = Code("conditionFailed")

        public var description: String { rawValue }
    }

    /// The fields, in one immutable box: an error is one reference wide (a command's state holds
    /// several, in its lifecycle and its recorded misuse; inline they made the state about 300 bytes
    /// larger per command).
    private final class Storage: Sendable {
        let code: Code
        let command: String
        let dependency: String?
        let cycle: [String]
        let condition: String?
        let underlying: (any Error)?
        let message: String

        init(
            code: Code, command: String, dependency: String?, cycle: [String], condition: String?,
            underlying: (any Error)?, message: String
        ) {
            self.code = code
            self.command = command
            self.dependency = dependency
            self.cycle = cycle
            self.condition = condition
            self.underlying = underlying
            self.message = message
        }
    }

    private let storage: Storage

    /// What went wrong.
    public var code: Code { storage.code }
    /// The name of the command concerned (its `name`, else its type).
    public var command: String { storage.command }
    /// The dependency concerned, for dependency errors.
    public var dependency: String? { storage.dependency }
    /// The commands of a cycle, in order, first repeated last, for ``Code/dependencyCycle``.
    public var cycle: [String] { storage.cycle }
    /// The condition concerned, for ``Code/conditionFailed``.
    public var condition: String? { storage.condition }
    /// The error that caused this one (a dependency's failure), if any.
    public var underlying: (any Error)? { storage.underlying }
    /// A sentence that names the command and says what to do.
    public var message: String { storage.message }

    /// Creates an error; prefer the static factories, which write the message.
    public init(
        code: Code, command: String, message: String, dependency: String? = nil, cycle: [String] = [],
        underlying: (any Error)? = nil, condition: String? = nil
    ) {
        storage = Storage(
            code: code, command: command, dependency: dependency, cycle: cycle, condition: condition,
            underlying: underlying, message: message)
    }

    public var description: String { "CommandError.\(code) (\(command)): \(message)" }
}

extension CommandError {
    static func cancelled(_ command: String) -> CommandError {
        CommandError(code: .cancelled, command: command, message: "'\(command)' was cancelled.")
    }

    static func dependencyFailed(_ command: String, dependency: String, error: any Error) -> CommandError {
        CommandError(
            code: .dependencyFailed, command: command,
            message: "'\(command)' did not run because its dependency '\(dependency)' failed (\(error)). "
                + "Fix or recover the dependency (catch/retry) to let '\(command)' run.",
            dependency: dependency, underlying: error)
    }

    static func dependencyCancelled(_ command: String, dependency: String) -> CommandError {
        CommandError(
            code: .dependencyCancelled, command: command,
            message: "'\(command)' did not run because its dependency '\(dependency)' was cancelled.",
            dependency: dependency)
    }

    /// Every command of a cycle gets one of these: the message names at most 16 commands of a long
    /// cycle (the first 8 and the last 8), so failing a 20,000-command cycle stays linear; ``cycle``
    /// keeps the whole path (one array shared by all of them).
    static func cycle(_ command: String, path: [String]) -> CommandError {
        let shown =
            path.count <= 16
            ? path.joined(separator: " -> ")
            : (path.prefix(8) + ["... (\(path.count - 16) more) ..."] + path.suffix(8)).joined(separator: " -> ")
        return CommandError(
            code: .dependencyCycle, command: command,
            message: "'\(command)' is part of a dependency cycle: \(shown). "
                + "Remove one of these edges; a command cannot (even indirectly) wait for itself.",
            cycle: path)
    }

    static func selfDependency(_ command: String) -> CommandError {
        CommandError(
            code: .selfDependency, command: command,
            message: "'\(command)' was given itself as a dependency. Remove that addDependency call.",
            cycle: [command, command])
    }

    static func dependencyAddedAfterStart(_ command: String, dependency: String) -> CommandError {
        CommandError(
            code: .dependencyAddedAfterStart, command: command,
            message: "'\(dependency)' was added as a dependency of '\(command)' after '\(command)' had been "
                + "handed to its queue, so the ordering cannot be honoured. Add dependencies before execute().",
            dependency: dependency)
    }

    static func resultAbandoned(_ command: String) -> CommandError {
        CommandError(
            code: .resultAbandoned, command: command,
            message: "'\(command)' released its CommandResult without complete(), fail() or succeed(). "
                + "Keep the result until the work ends and always send a terminal event.")
    }

    static func noValue(_ command: String) -> CommandError {
        CommandError(
            code: .noValue, command: command,
            message: "'\(command)' completed without sending a value, but one was awaited. Use `values` to accept none."
        )
    }

    static func conditionFailed(_ command: String, condition: String, error: (any Error)?) -> CommandError {
        let reason = error.map { "threw \($0)" } ?? "was false"
        return CommandError(
            code: .conditionFailed, command: command,
            message: "'\(command)' did not run: its condition '\(condition)' \(reason). "
                + "It ends cancelled; make the condition hold (or remove it) to let '\(command)' run.",
            underlying: error, condition: condition)
    }

    static func missingRun(_ command: String) -> CommandError {
        CommandError(
            code: .missingRun, command: command,
            message: "'\(command)' has no work: override run(_:) in a subclass or use Command { result in ... }.")
    }
}
