@_exported import CommandCore

/// The namespace of the graph module. Combinators and explicit graphs build on `CommandCore`;
/// this module re-exports it so `import CommandGraph` is enough.
public enum CommandGraphModule {
    /// The version of the combinator semantics this module follows (ReactiveCocoa 2's, see the docs).
    public static let semantics = "ReactiveCocoa 2"
}
