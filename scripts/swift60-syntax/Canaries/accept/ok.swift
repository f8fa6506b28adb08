func f() -> some Sendable { 1 }
let x = 1
