import Foundation

/// Releases the dependencies of a dying command with a loop instead of recursion.
///
/// A command holds its dependencies strongly (as Foundation does, so `dependencies` stays truthful
/// after a run). Releasing the last command of a million-deep chain would otherwise run a million
/// nested `deinit`s and overflow the stack. Here the outermost release on a thread drains a per-thread
/// list; a `deinit` reached from that loop only appends its dependencies to the list.
///
/// - Complexity: O(1) stack depth, amortised O(1) per released edge.
enum DeferredRelease {
    /// Per-thread state; only touched by its own thread.
    final class List {
        var items: [Operation] = []
        var draining = false
    }

    private static let perThread = ThreadLocal { List() }

    private static var current: List { perThread.current }

    static func release(_ operations: inout [Operation]) {
        let list = current
        list.items.append(contentsOf: operations)
        operations = []
        drain(list)
    }

    /// A dying command's edges and inputs, taken out of its state (consumed: emptied here, before the
    /// drain, so no other copy releases them recursively); no array is made for them.
    static func release(_ dependencies: inout OperationList, _ inputs: inout [Operation]) {
        let list = current
        for operation in dependencies { list.items.append(operation) }
        list.items.append(contentsOf: inputs)
        dependencies = OperationList()
        inputs = []
        drain(list)
    }

    /// Drains `list` unless a drain further up this thread's stack does.
    private static func drain(_ list: List) {
        if list.draining { return }
        list.draining = true
        while let operation = list.items.popLast() {
            // Dropping `operation` here may run its deinit, which appends to `list` and returns.
            _ = operation
        }
        list.draining = false
        // A wide release (a fan-in of a million) grew the list: do not keep that buffer per thread.
        if list.items.capacity > 4096 { list.items = [] }
    }
}
