nonisolated actor A {}
