/// A graph's nodes by their command's identity: an open-addressing table of 4-byte offsets into the
/// graph's node table, which holds the identities themselves (8 bytes a node at a million nodes,
/// against about 33 for a `[ObjectIdentifier: Int]`, whose buckets hold both). At most three quarters
/// full; linear probing; grown by doubling, rebuilt from the node table.
struct NodeIndex {
    /// A node's offset plus 1 in each bucket, 0 for an empty one; a power of 2 of them (or none).
    private var buckets: [UInt32] = []
    /// How many nodes the table holds: their offsets are `0..<count` (nodes are only appended).
    private(set) var count = 0
    /// 64 minus the log2 of the bucket count: a hash's top bits pick the first bucket.
    private var shift = 64

    /// The first bucket to look at for `id`: the address without its low bits (which an allocator's
    /// alignment leaves at 0), its bits mixed (a xor-shift, a multiply), then Fibonacci hashing. The
    /// multiply alone sent addresses at a regular stride (commands made one after another) into runs
    /// whose length changed with the stride: a 16-byte change in a command's size nearly tripled the
    /// probes of a graph's look-ups (callgrind `graphchain`).
    private func start(_ id: ObjectIdentifier) -> Int {
        var bits = UInt64(UInt(bitPattern: id)) >> 4
        bits ^= bits >> 31
        bits &*= 0xBF58_476D_1CE4_E5B9
        bits ^= bits >> 27
        return Int(truncatingIfNeeded: (bits &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift))
    }

    /// The offset of `id`'s node, if the table holds it; `identity(offset)` is the identity of the
    /// node at `offset`.
    func offset(of id: ObjectIdentifier, identity: (Int) -> ObjectIdentifier) -> Int? {
        guard !buckets.isEmpty else { return nil }
        let mask = buckets.count - 1
        var bucket = start(id)
        while true {
            let held = buckets[bucket]
            if held == 0 { return nil }
            let offset = Int(held) - 1
            if identity(offset) == id { return offset }
            bucket = (bucket + 1) & mask
        }
    }

    /// Adds the node at offset `count` (the node just appended), whose identity is `id`; `identity`
    /// reads every node's (a growth rebuilds the table from them).
    mutating func append(_ id: ObjectIdentifier, identity: (Int) -> ObjectIdentifier) {
        precondition(count < Int(UInt32.max), "a graph holds at most \(UInt32.max - 1) commands")
        if (count + 1) * 4 > buckets.count * 3 {
            let size = max(16, buckets.count * 2)
            buckets = [UInt32](repeating: 0, count: size)
            shift = 64 - size.trailingZeroBitCount
            for offset in 0..<count { place(identity(offset), offset) }
        }
        place(id, count)
        count += 1
    }

    private mutating func place(_ id: ObjectIdentifier, _ offset: Int) {
        let mask = buckets.count - 1
        var bucket = start(id)
        while buckets[bucket] != 0 { bucket = (bucket + 1) & mask }
        buckets[bucket] = UInt32(offset + 1)
    }
}
