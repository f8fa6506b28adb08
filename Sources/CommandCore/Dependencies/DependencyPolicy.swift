/// What a command does when one of its dependencies fails or is cancelled.
public enum DependencyPolicy: Sendable, Equatable {
    /// It does not run: it ends cancelled with ``CommandError/Code/dependencyFailed`` or
    /// ``CommandError/Code/dependencyCancelled`` naming the dependency. The default, and Foundation's
    /// spirit: a dependent needs its dependencies' work.
    case cancelIfAnyFails
    /// It runs once every dependency ended, however they ended (a fan-in that collects whatever it
    /// can, a clean-up step): its run reads their states.
    case runRegardless
    /// It runs as soon as one dependency completed (the first success of several sources); if every
    /// one failed or was cancelled, it ends cancelled with the last of those errors.
    case runOnFirstSuccess
}
