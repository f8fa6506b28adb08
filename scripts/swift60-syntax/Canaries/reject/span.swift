func f(_ s: Span<Int>) {}
