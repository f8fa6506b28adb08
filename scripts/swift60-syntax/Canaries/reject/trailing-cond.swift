if a, b, { }
