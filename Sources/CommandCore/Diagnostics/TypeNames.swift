/// The names of types as `String(describing:)` writes them, made once per type: a command without a
/// `name` is called by its type's name (in outcomes, reports, errors and logs), and formatting a type's
/// name costs about 7,500 instructions each time (a `Graph` listed every command of its outcome this
/// way: an eighth of a chain node's cost in a `Graph`). A few hundred bytes per type ever named.
enum TypeNames {
    // Guarded by its lock; grows with the number of distinct types named, which a program bounds.
    private static let cache = Locked([ObjectIdentifier: String]())

    /// `String(describing: type)`, from the cache after the first time.
    static func name(of type: Any.Type) -> String {
        let id = ObjectIdentifier(type)
        if let name = cache.withLock({ $0[id] }) { return name }
        let name = String(describing: type)
        cache.withLock { $0[id] = name }
        return name
    }
}
