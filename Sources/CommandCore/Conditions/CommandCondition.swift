import Foundation

/// A check that runs after a command's dependencies finished and before its work: "only if signed
/// in", "only if the cache is stale". Add it with ``Command/add(condition:)`` before the command
/// starts.
///
/// **When and where.** Once every dependency of the command finished (its ``DependencyPolicy``
/// applied first: a command a failed dependency cancelled evaluates nothing), the command runs each
/// condition's ``dependency(for:)`` (if any: a command is executed, a plain operation added to an
/// engine queue), then calls its ``evaluate(for:)`` in a task of its own, all conditions at once. No
/// thread waits meanwhile; the command is not ready (a queue of yours does not start it).
///
/// **Outcome.** Every condition true: the command takes its mutually exclusive categories (the union
/// of its conditions' ``mutuallyExclusiveCategories``, all at once, first come first served) and
/// runs. One condition false or throwing: the command ends cancelled, without running, with a
/// ``CommandError`` of code ``CommandError/Code/conditionFailed`` naming the command and the
/// condition (a thrown error as its `underlying`); the other conditions' evaluations are cancelled
/// (their tasks, and their unfinished dependencies). The answer comes as soon as it is known: a
/// false condition does not wait for a slow one. Dependents then follow their `dependencyPolicy` as
/// for any cancelled dependency.
///
/// **Cancel.** Cancelling the command while its conditions evaluate cancels their tasks and
/// unfinished dependencies; while it waits for a category, it leaves the line at once.
public protocol CommandCondition: Sendable {
    /// The condition's name, in errors and reports. Default: the type's name.
    var name: String { get }
    /// Categories the command must hold alone while it runs ("alert", "file:/tmp/x"). Default: none.
    var mutuallyExclusiveCategories: Set<String> { get }
    /// An operation to run before ``evaluate(for:)``, after the command's own dependencies: "ask for
    /// permission", "sign in". Return a fresh one: the command runs it. Default: nil.
    func dependency(for command: Operation) -> Operation?
    /// Whether the command may run. Called once, in a task, after ``dependency(for:)`` finished
    /// (whatever its outcome: read what it left behind). Throwing fails the condition with that error.
    func evaluate(for command: Operation) async throws -> Bool
}

extension CommandCondition {
    public var name: String { TypeNames.name(of: type(of: self)) }
    public var mutuallyExclusiveCategories: Set<String> { [] }
    public func dependency(for command: Operation) -> Operation? { nil }
}

/// A condition whose evaluation is a closure, synchronous or `async`:
/// `BlockCondition(name: "signed in") { await session.isSignedIn }`.
///
/// With a `dependency`, the closure makes a fresh operation for each command the condition checks,
/// run before `body` (see ``CommandCondition/dependency(for:)``): the sign-in pattern without a type
/// of your own, `BlockCondition(name: "signed in", dependency: { SignIn() }) { await session.isSignedIn }`.
public struct BlockCondition: CommandCondition {
    public let name: String
    private let body: @Sendable () async throws -> Bool
    private let makeDependency: (@Sendable () -> Operation?)?

    /// A condition that is `body`'s answer (a throw fails it with that error).
    public init(name: String = "BlockCondition", _ body: @escaping @Sendable () async throws -> Bool) {
        self.name = name
        self.body = body
        self.makeDependency = nil
    }

    /// A condition that runs the operation `dependency` makes (a fresh one per command), then is
    /// `body`'s answer.
    public init(
        name: String = "BlockCondition", dependency: @escaping @Sendable () -> Operation?,
        _ body: @escaping @Sendable () async throws -> Bool
    ) {
        self.name = name
        self.body = body
        self.makeDependency = dependency
    }

    public func dependency(for command: Operation) -> Operation? { makeDependency?() }

    public func evaluate(for command: Operation) async throws -> Bool { try await body() }
}

/// The inverse of a condition: true when `condition` is false, false when it is true. A throwing
/// `condition` still fails. Its dependency and categories are the inner condition's; its failure
/// names the inner condition (`Not<signed in>`).
public struct NegatedCondition<Inner: CommandCondition>: CommandCondition {
    public let condition: Inner

    public init(_ condition: Inner) { self.condition = condition }

    public var name: String { "Not<\(condition.name)>" }
    public var mutuallyExclusiveCategories: Set<String> { condition.mutuallyExclusiveCategories }
    public func dependency(for command: Operation) -> Operation? { condition.dependency(for: command) }
    public func evaluate(for command: Operation) async throws -> Bool {
        try await !condition.evaluate(for: command)
    }
}

/// A condition evaluated without running its ``CommandCondition/dependency(for:)``: "only if signed
/// in", without offering to sign in. Its categories are the inner condition's.
public struct SilentCondition<Inner: CommandCondition>: CommandCondition {
    public let condition: Inner

    public init(_ condition: Inner) { self.condition = condition }

    public var name: String { "Silent<\(condition.name)>" }
    public var mutuallyExclusiveCategories: Set<String> { condition.mutuallyExclusiveCategories }
    public func dependency(for command: Operation) -> Operation? { nil }
    public func evaluate(for command: Operation) async throws -> Bool {
        try await condition.evaluate(for: command)
    }
}

/// Makes commands that share `category` never overlap, from the start of their run to their terminal
/// event, wherever they run (`execute`, a graph, a group, a queue of yours): "one alert on screen",
/// "one write to this file at a time". Always true; see ``CommandCondition`` for the order in which
/// waiting commands are served.
public struct MutuallyExclusive: CommandCondition {
    public let category: String

    public init(category: String) { self.category = category }

    public var name: String { "MutuallyExclusive<\(category)>" }
    public var mutuallyExclusiveCategories: Set<String> { [category] }
    public func evaluate(for command: Operation) async throws -> Bool { true }
}
