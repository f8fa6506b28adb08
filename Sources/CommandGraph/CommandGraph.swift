@_exported import CommandCore

// The graph module: combinators, explicit graphs and groups, built on `CommandCore`, which it
// re-exports so `import CommandGraph` is enough.
