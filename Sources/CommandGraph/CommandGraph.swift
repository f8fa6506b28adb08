@_exported import CommandCore

/// The namespace of the graph module. Combinators and explicit graphs build on `CommandCore`;
/// this module re-exports it so `import CommandGraph` is enough.
public enum CommandGraphModule {
    /// Deprecated: each operator's doc comment states its semantics (ReactiveCocoa 2's where it and
    /// Combine differ); a string said nothing a program could use.
    @available(*, deprecated, message: "each operator's documentation states its semantics")
    public static let semantics = "ReactiveCocoa 2"
}
