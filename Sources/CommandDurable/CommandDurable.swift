@_exported import CommandGraph

// Durable workflows: a graph of commands whose steps are recorded in an embedded SQLite store and
// resumed after a crash. This module re-exports `CommandGraph` (and so `CommandCore`).
