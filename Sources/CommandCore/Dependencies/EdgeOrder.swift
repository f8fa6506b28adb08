import Foundation

/// The process-wide order that finds a cycle at the edge that closes it, at a cost bounded by the
/// part of the graph the edge affects rather than by the graph.
///
/// Every command carries a label (``CommandNode/orderWord``), and every edge between commands
/// keeps `label(dependency) < label(dependent)`: the labels are a topological order of all commands
/// of the process. A new command's label is above every earlier one's. Adding `x.addDependency(y)`:
///
/// 1. `label(y) < label(x)`: the order already holds; no path from `y` back to `x` can exist (labels
///    fall along every path). O(1): the usual case, dependencies made before their dependents.
/// 2. Nothing depends on `x` yet: no path can lead back to `x`, so no cycle; `x`'s label is raised
///    above `y`'s. O(1): a graph built from its targets back, or with commands made in any order.
/// 3. Otherwise a bounded search: the dependencies reachable from `y` whose labels are at least
///    `label(x)` (labels fall along every path, so a path back to `x` stays above it: the search
///    finds the cycle if there is one). Those nodes are moved below `x`, keeping their order, each
///    only ever lowered (so no edge into them breaks) and above every dependency left outside
///    (the k-th highest to `min(its label, label(x) - k * spacing)`).
///    O(nodes and edges between `label(x)` and `label(y)` reachable from `y`); when the gap below
///    `x` is too narrow for them, the window widens (doubling) and takes in more of `y`'s past.
///
/// Plain `Operation`s are not labelled: an edge to or through one is not searched (the execute walk
/// still names a cycle it finds through commands). `addDependency` records an edge that closes a
/// cycle (Foundation's rule: a cancel may break it in a user's queue) without ordering it; the order
/// then no longer holds for that edge, so a later check through it may miss a cycle, which the
/// execute walk still names: the exact check at every call is for graphs without such an edge.
///
/// The labels and the `hasDependents` flags are guarded by ``lock``, which also serialises every
/// edge between two commands (the check and the recording of the edge happen under it, so two
/// threads cannot each add one half of a cycle). A command's own lock is taken inside it, never
/// the other way round.
enum EdgeOrder {
    /// Guards every command's `orderWord` and makes an edge's check and its recording one step. An
    /// `Int`, not `()`: a zero-sized value shares its address with the mutex, which ThreadSanitizer
    /// then reports as a race on the mutex itself.
    static let lock = Locked(0)

    /// The space between the labels of two commands made one after the other, and the distance a
    /// raise or a move puts between a node and the one it must follow.
    static let step: Int64 = 1 << 16

    /// The first label of the command created `creationIndex`-th.
    static func initialWord(creationIndex: UInt64) -> Int64 {
        word(label: Int64(truncatingIfNeeded: creationIndex) &* step, hasDependents: false)
    }

    static func word(label: Int64, hasDependents: Bool) -> Int64 { label << 1 | (hasDependents ? 1 : 0) }
    static func label(_ word: Int64) -> Int64 { word >> 1 }
    static func hasDependents(_ word: Int64) -> Bool { word & 1 != 0 }

    /// Makes room for the edge `dependent -> dependency` (the dependent waits for the dependency) in
    /// the order, or returns the cycle it would close: names from `dependent` back to `dependent`.
    /// Call with ``lock`` held. The labels may change even when a cycle is returned (they stay a
    /// valid order of the edges that exist).
    ///
    /// The dependent's word is passed in and written back (a generic command reads and writes its own
    /// field without making itself an existential: no conformance look-up on the common path).
    @inline(__always)
    static func admit(
        dependent x: AnyObject, word: inout Int64, name: @autoclosure () -> String, dependency y: CommandNode
    ) -> [String]? {
        let lo = label(word)
        let high = label(y.orderWord)
        if high < lo { return nil }
        if !hasDependents(word) {
            word = self.word(label: high + step, hasDependents: false)
            return nil
        }
        return placeBelow(x, lo: lo, name: name(), dependency: y)
    }

    /// Step 3, out of line.
    @inline(never)
    private static func placeBelow(_ x: AnyObject, lo: Int64, name: String, dependency y: CommandNode)
        -> [String]?
    {
        var window = step
        while true {
            switch search(from: y, below: x, name: name, lo: lo, window: window) {
            case .cycle(let path):
                return path
            case .placed:
                return nil
            case .tooNarrow(let outsideMax):
                window = max(window &* 2, lo - outsideMax + step)
            }
        }
    }

    /// Records that `node` has a dependent (so its label can no longer be raised freely).
    static func markDependedOn(_ node: CommandNode) {
        if !hasDependents(node.orderWord) { node.orderWord |= 1 }
    }

    private enum SearchResult {
        case cycle([String])
        case placed
        /// The gap above the highest outside dependency (its label) is too narrow.
        case tooNarrow(Int64)
    }

    /// One round of step 3 with the window `[lo - window, ...)`.
    private static func search(
        from y: CommandNode, below x: AnyObject, name: String, lo: Int64, window: Int64
    ) -> SearchResult {
        let (difference, overflow) = lo.subtractingReportingOverflow(window)
        let threshold = overflow ? Int64.min : difference
        var members: [CommandNode] = [y]
        var parents: [Int] = [-1]
        var index: [ObjectIdentifier: Int] = [ObjectIdentifier(y): 0]
        var stack = [0]
        // The highest label of a dependency left outside (below the window).
        var outsideMax = Int64.min
        while let current = stack.popLast() {
            let node = members[current]
            var cursor = 0
            while let operation = node.walkDependency(at: cursor) {
                cursor += 1
                guard let dependency = operation as? CommandNode else { continue }
                if dependency === x {
                    var chain = [current]
                    while parents[chain[chain.count - 1]] >= 0 { chain.append(parents[chain[chain.count - 1]]) }
                    return .cycle([name] + chain.reversed().map { members[$0].displayName } + [name])
                }
                let dependencyLabel = label(dependency.orderWord)
                if dependencyLabel < threshold {
                    outsideMax = max(outsideMax, dependencyLabel)
                    continue
                }
                let id = ObjectIdentifier(dependency)
                if index[id] == nil {
                    index[id] = members.count
                    members.append(dependency)
                    parents.append(current)
                    stack.append(members.count - 1)
                }
            }
        }
        let count = Int64(members.count)
        let spacing: Int64
        if outsideMax == .min {
            spacing = step
        } else {
            let room = lo - outsideMax
            guard room > count else { return .tooNarrow(outsideMax) }
            spacing = min(step, room / (count + 1))
        }
        // The k-th highest goes to slot `lo - k * spacing`, or stays where it is if lower already:
        // min(old, slot) keeps their order (both fall with k), none rises, all end below `lo`, and the
        // lowest is at least `lo - count * spacing`, above `outsideMax`. (A running cap instead of
        // fixed slots would follow a member that stayed low and push the next ones below their own
        // outside dependencies.)
        members.sort { label($0.orderWord) > label($1.orderWord) }
        for (rank, member) in members.enumerated() {
            let placed = min(label(member.orderWord), lo - spacing * Int64(rank + 1))
            member.orderWord = word(label: placed, hasDependents: hasDependents(member.orderWord))
        }
        return .placed
    }
}
