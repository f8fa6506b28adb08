nonisolated(nonsending) func f() async {}
