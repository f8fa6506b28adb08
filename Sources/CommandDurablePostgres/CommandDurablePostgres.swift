@_exported import CommandDurable

// Durable workflows in a PostgreSQL database. This module re-exports `CommandDurable` (and so
// `CommandGraph` and `CommandCore`): `import CommandDurablePostgres` alone is enough.
