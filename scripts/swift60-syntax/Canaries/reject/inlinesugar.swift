let a: [3 of Int] = [1, 2, 3]
