import Foundation

/// Why a compound condition (``AndCondition``, ``OrCondition``) was false: which part decided, and
/// what it threw, if it threw. The `underlying` error of the command's
/// ``CommandError/Code/conditionFailed`` error.
public struct CompoundConditionFailure: Error, Sendable, CustomStringConvertible {
    /// The compound condition's name (`And<signed in, online>`).
    public let condition: String
    /// The parts that were false or threw, by name, in order (one for `AndCondition`: the first;
    /// every part for `OrCondition`).
    public let failedParts: [String]
    /// The errors the failed parts threw, in the order of `failedParts` (nil for a part that was false).
    public let errors: [(any Error)?]

    public var description: String {
        let parts = zip(failedParts, errors).map { name, error in
            error.map { "'\(name)' threw \($0)" } ?? "'\(name)' was false"
        }
        return "\(condition): " + parts.joined(separator: ", ")
    }
}

/// True when every part is true: "signed in and online". The parts evaluate in order, and the first
/// false or throwing part decides (the rest are not evaluated); the command's `conditionFailed` error
/// then has a ``CompoundConditionFailure`` naming that part as its `underlying` error. A part that is
/// an ``IgnoredCondition`` and is false makes the command complete without running, as it would alone.
///
/// Its categories are the union of its parts'; its dependency runs every part's dependency (all at
/// once, each as the gate runs one: a command is executed, a plain operation added to an engine
/// queue) and ends when all of them ended, whatever their outcome.
public struct AndCondition: CommandCondition {
    public let conditions: [any CommandCondition]

    public init(_ conditions: any CommandCondition...) { self.conditions = conditions }
    public init(_ conditions: [any CommandCondition]) { self.conditions = conditions }

    public var name: String { "And<\(conditions.map(\.name).joined(separator: ", "))>" }
    public var mutuallyExclusiveCategories: Set<String> { ConditionDependencyBatch.categories(of: conditions) }
    public func dependency(for command: Operation) -> Operation? {
        ConditionDependencyBatch.dependency(of: conditions, for: command, name: name)
    }
    public func evaluate(for command: Operation) async throws -> Bool {
        for condition in conditions {
            do {
                if try await !condition.evaluate(for: command) {
                    throw CompoundConditionFailure(condition: name, failedParts: [condition.name], errors: [nil])
                }
            } catch let passedOn as CompoundConditionFailure {
                throw passedOn
            } catch let ignored as ConditionIgnored {
                throw ignored
            } catch {
                throw CompoundConditionFailure(condition: name, failedParts: [condition.name], errors: [error])
            }
        }
        return true
    }
}

/// True when any part is true: "cached or online". The parts evaluate in order until one is true (a
/// throwing part counts as false, and the next is tried); none true: the command's
/// `conditionFailed` error has a ``CompoundConditionFailure`` listing every part as its `underlying`
/// error. No part: false. A false ``IgnoredCondition`` part counts as false here (the next part is
/// tried); the command completes without running only if every part is false and one of them was
/// ignored.
///
/// Its categories and its dependency are the union of its parts', as for ``AndCondition``.
public struct OrCondition: CommandCondition {
    public let conditions: [any CommandCondition]

    public init(_ conditions: any CommandCondition...) { self.conditions = conditions }
    public init(_ conditions: [any CommandCondition]) { self.conditions = conditions }

    public var name: String { "Or<\(conditions.map(\.name).joined(separator: ", "))>" }
    public var mutuallyExclusiveCategories: Set<String> { ConditionDependencyBatch.categories(of: conditions) }
    public func dependency(for command: Operation) -> Operation? {
        ConditionDependencyBatch.dependency(of: conditions, for: command, name: name)
    }
    public func evaluate(for command: Operation) async throws -> Bool {
        var errors: [(any Error)?] = []
        for condition in conditions {
            do {
                if try await condition.evaluate(for: command) { return true }
                errors.append(nil)
            } catch {
                errors.append(error)
            }
        }
        if let ignored = errors.lazy.compactMap({ $0 as? ConditionIgnored }).first { throw ignored }
        throw CompoundConditionFailure(condition: name, failedParts: conditions.map(\.name), errors: errors)
    }
}

/// A condition whose failure is not an error: when `condition` is false or throws, the command
/// **completes** without running and without a value, and its dependents run (as after any completed
/// dependency). "Refresh the cache only if it is stale": a fresh cache is not a failure.
///
/// Its dependency and categories are the inner condition's; its name is `Ignored<inner>`. The first
/// false condition of a command decides: an ignored one that is false first completes the command,
/// another condition false first cancels it (`conditionFailed`).
public struct IgnoredCondition<Inner: CommandCondition>: CommandCondition {
    public let condition: Inner

    public init(_ condition: Inner) { self.condition = condition }

    public var name: String { "Ignored<\(condition.name)>" }
    public var mutuallyExclusiveCategories: Set<String> { condition.mutuallyExclusiveCategories }
    public func dependency(for command: Operation) -> Operation? { condition.dependency(for: command) }
    public func evaluate(for command: Operation) async throws -> Bool {
        // `try?`: a throw is ignored too (ProcedureKit's rule).
        if (try? await condition.evaluate(for: command)) == true { return true }
        throw ConditionIgnored(condition: name)
    }
}

/// Thrown by ``IgnoredCondition``'s `evaluate` (or passed on by ``AndCondition`` and ``OrCondition``):
/// the gate completes the command without running it. Throw it from a condition of your own for the
/// same effect.
public struct ConditionIgnored: Error, Sendable {
    /// The condition that was false (`Ignored<cache is stale>`).
    public let condition: String

    public init(condition: String) { self.condition = condition }
}

/// Several conditions' dependencies as one: a command that runs each of them as the gate runs a
/// condition's dependency, and completes when every one ended (whatever its outcome). Cancelling it
/// cancels those still running.
enum ConditionDependencyBatch {
    /// The union of `conditions`' categories.
    static func categories(of conditions: [any CommandCondition]) -> Set<String> {
        conditions.reduce(into: []) { $0.formUnion($1.mutuallyExclusiveCategories) }
    }

    /// Every part's dependency for `command`, as one operation (nil if none has one).
    static func dependency(of conditions: [any CommandCondition], for command: Operation, name: String) -> Operation? {
        make(conditions.compactMap { $0.dependency(for: command) }, name: name)
    }

    static func make(_ dependencies: [Operation], name: String) -> Operation? {
        if dependencies.count <= 1 { return dependencies.first }
        let batch = Command<Void> { result in
            let remaining = Locked(dependencies.count)
            for dependency in dependencies {
                ConditionDependencies.run(dependency) {
                    let last = remaining.withLock { count -> Bool in
                        count -= 1
                        return count == 0
                    }
                    if last { result.succeed() }
                }
            }
            return BlockCancelable { for dependency in dependencies { dependency.cancel() } }
        }
        batch.name = "dependencies of \(name)"
        return batch
    }
}
