let c = { [a, b, ] in a }
