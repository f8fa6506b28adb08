struct S: ~Escapable {}
