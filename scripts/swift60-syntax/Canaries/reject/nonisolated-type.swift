nonisolated struct S {}
