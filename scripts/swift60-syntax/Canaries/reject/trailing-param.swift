func f(a: Int, b: Int, ) {}
