import Foundation

/// One `inject(from:_:)` of a command: applied once, when the command's dependencies finished and
/// before its conditions evaluate. Holds the dependency (to read its last value) until it is applied
/// or the command ends.
struct Injection: Sendable {
    /// What applying it found.
    enum Outcome: Sendable {
        /// The closure ran.
        case applied
        /// The dependency did not complete (it failed, was cancelled, or has not ended: the command's
        /// `dependencyPolicy` let it go on anyway): the closure is not called.
        case skipped
        /// The dependency completed without sending a value.
        case noValue(dependency: String)
        /// The closure threw.
        case threw(any Error)
    }

    let apply: @Sendable (Operation) -> Outcome
}

extension Command {
    /// Hands `dependency`'s last value to this command before it runs: `dependency` becomes a
    /// dependency of this command (as `addDependency` would make it), and once it completed, `body`
    /// gets this command, typed as itself, and that value.
    ///
    /// ```swift
    /// final class Parse: Command<Model>, @unchecked Sendable { var data: Data? ... }
    /// let fetch = FetchCommand(url)
    /// let parse = Parse()
    /// parse.inject(from: fetch) { parse, data in parse.data = data }
    /// try graph.add(fetch); try graph.add(parse)   // or a GroupCommand, or a queue of yours
    /// ```
    ///
    /// **When and where.** `body` runs once, after every dependency of this command finished (its
    /// ``dependencyPolicy`` applied first), before its conditions evaluate and before `run`: on the
    /// thread where the last dependency's end was seen (or where `execute` was called, if they had all
    /// ended), or on a Dispatch thread when a queue of yours asked `isReady` first. Until then a queue
    /// of yours sees `isReady` false. Several injections, from different dependencies or the same
    /// one, are all applied, in the order they were added.
    ///
    /// **Outcome.**
    /// - `dependency` completed without a value: this command ends cancelled, without running, with a
    ///   ``CommandError`` of code ``CommandError/Code/noValue`` naming both commands.
    /// - `dependency` failed or was cancelled: as for any dependency (``DependencyPolicy``); if the
    ///   policy lets this command run anyway, `body` is not called.
    /// - `body` throws: this command ends **failed** with that error (the error itself), without
    ///   running; the remaining injections are not applied.
    ///
    /// **Memory.** `body` gets the command as an argument: capture neither command in it. The
    /// injection holds `dependency` until it is applied or this command ended, then lets it go;
    /// `dependency` never holds this command, so there is no cycle. A `dependency` whose
    /// ``replay`` is `.none` is switched to `.latest` (its last value must outlive its run).
    ///
    /// Call it before executing (or adding the command to a queue of yours); a later call is ignored,
    /// with a diagnostic naming the command (code ``CommandError/Code/changedAfterStart``).
    public func inject<Dependency: Sendable>(
        from dependency: Command<Dependency>, _ body: @escaping @Sendable (Self, Dependency) throws -> Void
    ) {
        let injection = Injection { [dependency] target in
            guard let (value, outcome) = dependency.lastValueIfEnded(), outcome.isSuccess else { return .skipped }
            guard let value else { return .noValue(dependency: dependency.displayName) }
            do {
                try body(unsafeDowncast(target, to: Self.self), value)
                return .applied
            } catch {
                return .threw(error)
            }
        }
        guard changeGate({ $0.injections.append(injection) }) else {
            return diagnose(
                .changedAfterStart,
                "inject(from: \(dependency.displayName)) was called after '\(displayName)' was executed, added to a queue or began its checks; it is ignored (inject before executing or adding it to a queue)."
            )
        }
        if dependency.replay == .none { dependency.replay = .latest }
        addDependency(dependency)
    }

    /// The last value kept and the ending, once the command ended (nil before).
    func lastValueIfEnded() -> (Output?, Termination)? {
        machine.withLock { machine -> (Output?, Termination)? in
            guard let outcome = machine.outcome else { return nil }
            let log = machine.log
            return (log.endIndex > log.startIndex ? log.value(at: log.endIndex - 1, as: Output.self) : nil, outcome)
        }
    }

    /// Applies the injections taken from the gate, in order: nil if all applied (or were skipped),
    /// else how the command ends.
    func applyInjections(_ injections: [Injection]) -> Termination? {
        for injection in injections {
            switch injection.apply(self) {
            case .applied, .skipped:
                continue
            case .noValue(let dependency):
                return .cancelled(.injectionWithoutValue(displayName, dependency: dependency))
            case .threw(let error):
                return .failed(error)
            }
        }
        return nil
    }
}

extension CommandError {
    static func injectionWithoutValue(_ command: String, dependency: String) -> CommandError {
        CommandError(
            code: .noValue, command: command,
            message: "'\(command)' did not run: '\(dependency)', which it injects from, completed without "
                + "sending a value. Make '\(dependency)' send one, or inject from a command that always does.",
            dependency: dependency)
    }
}
