// swift run Quickstart
//
// Runs a subclassed command and a closure command with block callbacks, shows on which queue the work
// ran and where the callbacks arrived (the main queue, captured because `execute` was called there),
// and cancels a slow command while it runs.
import CommandCore
import Foundation

/// A subclassed command: its parameters are its own properties (immutable, so `@unchecked Sendable`
/// is honest; Swift requires subclasses of `Operation` to restate it).
final class Add: Command<Int>, @unchecked Sendable {
    let a: Int
    let b: Int

    init(_ a: Int, _ b: Int) {
        self.a = a
        self.b = b
        super.init()
        name = "Add(\(a), \(b))"
    }

    override func run(_ result: CommandResult<Int>) -> (any Cancelable)? {
        let queue = OperationQueue.current?.name ?? "?"
        print("\(elapsed())  \(name!) runs on OperationQueue '\(queue)', main queue: \(CallbackContext.isMainQueue)")
        result.succeed(a + b)
        return nil
    }
}

/// A closure command that would take 5 seconds; it is cancelled while it runs.
let slow = Command<String> { result in
    print("\(elapsed())  slow runs on OperationQueue '\(OperationQueue.current?.name ?? "?")'")
    DispatchQueue.global().asyncAfter(deadline: .now() + 5) {
        if !result.isCancelled { result.succeed("finished") }
    }
    return BlockCancelable { print("\(elapsed())  slow: the cancelable its run returned was cancelled") }
}
slow.name = "slow"

let started = Date()
func elapsed() -> String { String(format: "%6.1f ms", Date().timeIntervalSince(started) * 1000) }

/// Exits once both commands reported their terminal event.
final class Terminals: @unchecked Sendable {
    // Only touched on the main queue, where the callbacks below run.
    private var remaining = 2
    func arrived() {
        remaining -= 1
        if remaining == 0 {
            print("\(elapsed())  both ended; slow.state = \(slow.state), slow.isFinished = \(slow.isFinished)")
            exit(0)
        }
    }
}
let terminals = Terminals()

print("Executing Add(2, 3) and slow from the main queue:")
Add(2, 3).execute { event in
    print("\(elapsed())  Add callback, on the main queue: \(CallbackContext.isMainQueue) -> \(event)")
    if event.isTerminal { terminals.arrived() }
}

let token = slow.execute { event in
    print("\(elapsed())  slow callback, on the main queue: \(CallbackContext.isMainQueue) -> \(event)")
    if event.isTerminal { terminals.arrived() }
}
DispatchQueue.main.asyncAfter(deadline: .now() + 0.05) {
    print("\(elapsed())  cancelling slow, which is \(slow.state)")
    token.cancel()
}

dispatchMain()
