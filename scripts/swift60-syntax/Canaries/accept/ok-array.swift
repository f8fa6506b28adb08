let s = [1, 2]
