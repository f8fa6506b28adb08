nonisolated func f() {}
struct A { nonisolated var x: Int { 1 } }
