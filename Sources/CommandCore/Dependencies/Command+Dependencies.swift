import Foundation

/// Identifies one execute walk; a node claimed by a walk belongs to it until registered.
private let walkCounter = Locked<UInt64>(1)

/// Tells dependents that a command ended, and their dependents if they ended because of it, with a
/// loop: a failure at the root of a million-deep chain must not recurse a million times.
func propagate(_ first: Propagation) {
    // A stack, its top kept out of the array: a chain's ending (one dependent, nothing further to
    // tell) allocates no array. Popped in the same order as one array would be (last pushed first).
    var top: Propagation? = first
    var stack: [Propagation] = []
    // The first dependent made ready continues on a lane queue (see `QueuePool`).
    var lane = true
    while let propagation = top ?? stack.popLast() {
        top = nil
        for dependent in propagation.dependents {
            if let next = dependent.dependencyDidFinish(
                propagation.outcome, dependencyName: propagation.source.displayName, lane: &lane)
            {
                if let pushed = top { stack.append(pushed) }
                top = next
            }
        }
    }
}

/// The exclusivity book holds commands through this small protocol (its tests use stand-ins).
extension Command: ExclusivityWaiter {}

extension Command {
    /// ``CommandNode/claim(walk:)``: an ended command the walk reaches finishes now.
    func claimForWalk(_ walk: UInt64) -> WalkClaim {
        let claim = machine.withLock { $0.claim(walk: walk) }
        if case .finishedNow = claim {
            publishFinished()
            return .notPending
        }
        return claim
    }

    /// ``CommandNode/dependencyDidFinish(_:dependencyName:isHold:lane:)``.
    func finishDependency(
        _ outcome: Termination, dependencyName: @autoclosure () -> String, isHold: Bool, lane: inout Bool
    ) -> Propagation? {
        // The dependency's name is computed outside this command's lock (it takes the dependency's),
        // and only when it is needed.
        let dependency = outcome.isSuccess ? "" : dependencyName()
        let action = machine.withLock {
            $0.dependencyFinished(
                outcome, dependencyName: dependency, typeName: TypeNames.name(of: Self.self), isHold: isHold)
        }
        switch action {
        case .none:
            return nil
        case .handOver:
            handOver(lane: lane)
            lane = false
            return nil
        case .evaluateGate:
            arriveAtGate(lane: lane)
            lane = false
            return nil
        case .ended(let ending):
            return performLocally(ending)
        }
    }

    /// Executes this command and every pending command it depends on, directly or not.
    ///
    /// Walks the pending dependencies depth first with an explicit stack (no recursion, so a
    /// million-deep chain is fine), claiming each for this walk and finding cycles (an edge to a
    /// node still on the stack). A node is registered with its dependencies when it leaves the stack
    /// (post-order: dependencies first); one whose dependencies all finished is handed to its queue
    /// at once. Every cycle through a node is found while it is on the stack (depth first: whatever
    /// it reaches is walked before it leaves), so its cycle error is known when it is registered.
    ///
    /// Memory: a frame is a node and a cursor (its dependencies are read from the node as the walk
    /// goes), and nothing else is kept per node: at a million-deep chain the walk's stack is the only
    /// memory it holds (no copy of a node's dependency list in its frame, no post-order list of every
    /// node: those would cost about 35 bytes a command at the peak of a million-node chain).
    ///
    /// - Complexity: O(nodes + edges) of the pending part of the graph.
    /// ``CommandNode/executeGraph()``.
    func executeWalk() {
        let walk = walkCounter.withLock { counter in
            defer { counter &+= 1 }
            return counter
        }
        guard case .claimed(let rootDependencies) = claim(walk: walk) else { return }
        if rootDependencies.isEmpty {
            for node in register(walk: walk, cycleError: nil) { node.executeGraph() }
            return
        }

        var stack = [WalkFrame(node: self)]
        var cycles: [ObjectIdentifier: CommandError] = [:]
        var late: [CommandNode] = []
        while !stack.isEmpty {
            let top = stack.count - 1
            guard let dependency = stack[top].node.walkDependency(at: stack[top].next) else {
                let frame = stack.removeLast()
                frame.node.leaveStack(walk: walk)
                let cycleError = cycles.isEmpty ? nil : cycles.removeValue(forKey: ObjectIdentifier(frame.node))
                // Almost always none: appended only when there are some (an empty `+=` still cost a
                // generic call, about 90 instructions a node of a chain).
                let found = frame.node.register(walk: walk, cycleError: cycleError)
                if !found.isEmpty { late += found }
                continue
            }
            stack[top].next += 1
            guard let node = dependency as? CommandNode else { continue }
            switch node.claim(walk: walk) {
            case .claimed:
                stack.append(WalkFrame(node: node))
            case .onStack:
                let start = stack.lastIndex { $0.node === node } ?? top
                let path = stack[start...].map { $0.node.displayName } + [node.displayName]
                for frame in stack[start...] {
                    cycles[ObjectIdentifier(frame.node)] = .cycle(frame.node.displayName, path: path)
                }
            case .notPending, .finishedNow:
                break
            }
        }
        for node in late { node.executeGraph() }
    }

    /// Phase two for this node; returns dependencies found pending (added during the walk), which the
    /// caller executes.
    func registerAfterWalk(_ walk: UInt64, cycleError: CommandError?) -> [CommandNode] {
        if let error = cycleError {
            if let ending = machine.withLock({ $0.terminate(.failed(error), word: $1) }) { perform(ending) }
            return []
        }
        let dependencies: OperationList
        let admitting = !InlineExecution.isOn
        let step = withQueueMaker(lane: false) { makeQueue in
            machine.withLock { $0.register(walk: walk, admitting: admitting, makeQueue: makeQueue) }
        }
        switch step {
        case .none:
            return []
        case .placed(let placement):
            perform(placement, lane: false)
            return []
        case .fail(let error):
            if let ending = machine.withLock({ $0.terminate(.failed(error), word: $1) }) { perform(ending) }
            return []
        case .evaluateGate:
            arriveAtGate(lane: false)
            return []
        case .register(let list):
            dependencies = list
        }
        var late: [CommandNode] = []
        for dependency in dependencies {
            if let node = dependency as? CommandNode {
                switch node.addDependent(self) {
                case .registered(let pending):
                    if pending { late.append(node) }
                case .ended(let outcome):
                    if let next = dependencyDidFinish(outcome, dependencyName: node.displayName, isHold: false) {
                        propagate(next)
                    }
                }
            } else {
                watch(dependency)
            }
        }
        // Release the registration hold: enqueues the command if every dependency had finished.
        if let next = dependencyDidFinish(.completed, dependencyName: "", isHold: true) { propagate(next) }
        return late
    }

    /// Watches a plain `Operation` dependency with a small watcher operation that depends on it alone
    /// (see ``PlainOperationWatcher``); the dependency's `completionBlock` is left to its owner.
    private func watch(_ operation: Operation) {
        PlainOperationWatcher.watch(operation) { [self] in
            let outcome: Termination =
                operation.isCancelled ? .cancelled(.cancelled(operationName(operation))) : .completed
            if let next = dependencyDidFinish(outcome, dependencyName: operationName(operation), isHold: false) {
                propagate(next)
            }
        }
    }

    // MARK: - Edges

    /// `addDependency`. An edge closing a cycle is recorded, as Foundation records it (in a queue of
    /// yours, a cancel breaks the cycle, as Foundation's own tests do), and the execute walk names
    /// the cycle when the engine executes the graph; only a command already executed (claimed or
    /// waiting, which no later walk will see) refuses it and fails now with the cycle named. See
    /// ``EdgeOrder`` for the check's cost.
    func addEdge(_ operation: Operation) {
        let node = operation as? CommandNode
        guard let node, operation !== self else {
            // A plain operation or the command itself: nothing to order.
            let isSelf = operation === self
            let action = machine.withLock {
                $0.addDependency(operation, isSelf: isSelf, typeName: TypeNames.name(of: Self.self))
            }
            perform(action, adding: operation, node: nil, isSelf: isSelf)
            return
        }
        let admission = EdgeOrder.lock.withLock { _ -> EdgeAdmission in
            if let path = EdgeOrder.admit(dependent: self, word: &orderWord, name: displayName, dependency: node),
                machine.withLock({ $0.isExecutedAndWaiting })
            {
                return .cycle(path)
            }
            return .recorded(record(operation, node: node))
        }
        switch admission {
        case .cycle(let path):
            let error = CommandError.cycle(displayName, path: path)
            if let ending = machine.withLock({ $0.refuse(error) }) { perform(ending) }
        case .recorded(let action):
            perform(action, adding: operation, node: node, isSelf: false)
        }
    }

    /// `addDependency` that throws instead of recording: a self-dependency, an edge closing a cycle
    /// (the error names it in order: `fetch -> parse -> fetch`) or an edge added after the command
    /// was handed to its queue is refused with a ``CommandError``, and the command is left as it was.
    ///
    /// - Complexity: O(1) when `operation` was made before this command or when no command depends on
    ///   this one yet; otherwise bounded by the part of the graph between the two (see the
    ///   Dependency graphs article).
    public func depend(on operation: Operation) throws { try depend(on: [operation]) }

    /// Adds every edge of `operations` or none: throws, adding nothing, if one of them is this command,
    /// closes a cycle or comes after the command was handed to its queue.
    public func depend(on operations: [Operation]) throws {
        if operations.contains(where: { $0 === self }) { throw CommandError.selfDependency(displayName) }
        guard let first = operations.first else { return }
        guard machine.withLock({ $0.acceptsDependencies }) else {
            throw CommandError.dependencyAddedAfterStart(displayName, dependency: operationName(first))
        }
        let nodes = operations.map { $0 as? CommandNode }
        // Edges leaving one command are independent (a path back to it never uses them): checking
        // each against the graph as it is, then recording all, finds every cycle.
        let actions = try EdgeOrder.lock.withLock { _ throws -> [AddDependencyAction] in
            for node in nodes {
                if let node,
                    let path = EdgeOrder.admit(dependent: self, word: &orderWord, name: displayName, dependency: node)
                {
                    throw CommandError.cycle(displayName, path: path)
                }
            }
            return zip(operations, nodes).map { record($0, node: $1) }
        }
        for (index, action) in actions.enumerated() {
            perform(action, adding: operations[index], node: nodes[index], isSelf: false)
        }
    }

    /// Records an edge whose place in the order was made; `EdgeOrder.lock` held.
    private func record(_ operation: Operation, node: CommandNode?) -> AddDependencyAction {
        let action = machine.withLock {
            $0.addDependency(operation, isSelf: false, typeName: TypeNames.name(of: Self.self))
        }
        if let node {
            switch action {
            case .none, .registerLate: EdgeOrder.markDependedOn(node)
            case .duplicate, .failAfterStart, .ignoredFinished, .failNow: break
            }
        }
        return action
    }

    /// The side effects of recording an edge (after every lock was released).
    private func perform(
        _ action: AddDependencyAction, adding operation: Operation, node: CommandNode?, isSelf: Bool
    ) {
        switch action {
        case .duplicate:
            return
        case .none:
            if !isSelf { trackReadiness(of: operation, node: node) }
        case .failNow(let error):
            if let ending = machine.withLock({ $0.terminate(.failed(error), word: $1) }) { perform(ending) }
        case .ignoredFinished:
            diagnose(.alreadyFinished, "addDependency(\(operationName(operation))) after the command ended is ignored.")
        case .failAfterStart:
            let error = CommandError.dependencyAddedAfterStart(displayName, dependency: operationName(operation))
            if let ending = machine.withLock({ $0.terminate(.failed(error), word: $1) }) { perform(ending) }
        case .registerLate:
            trackReadiness(of: operation, node: node)
            if let node {
                switch node.addDependent(self) {
                case .registered(let pending):
                    if pending { node.executeGraph() }
                case .ended(let outcome):
                    if let next = dependencyDidFinish(outcome, dependencyName: node.displayName, isHold: false) {
                        propagate(next)
                    }
                }
            } else {
                watch(operation)
            }
        }
    }

    func removeEdge(_ operation: Operation) {
        switch machine.withLock({ $0.removeDependency(operation) }) {
        case .removed:
            untrackReadiness(of: operation)
        case .absent:
            break
        case .refused:
            diagnose(
                .changedAfterStart,
                "removeDependency(\(operationName(operation))) after execute is ignored: remove edges before executing."
            )
        }
    }
}

/// One node on the execute walk's stack: the node and the index of its next dependency to walk.
private struct WalkFrame {
    let node: CommandNode
    var next = 0
}
