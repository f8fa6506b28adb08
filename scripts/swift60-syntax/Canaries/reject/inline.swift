let a: InlineArray<3, Int> = [1, 2, 3]
