import CommandCore
import Foundation

/// How a step's command ended: its last value (nil if it sent none), its failure, or a cancel.
enum StepEnd: Sendable {
    case completed((any Sendable)?)
    case failed(any Error)
    case cancelled(CommandError)
}

/// One attempt's command, whatever its output type: executed, its last value kept.
struct StepRun: Sendable {
    let command: Operation
    /// Executes the command; `ended` is called once, where it ended.
    let start: @Sendable (_ ended: @escaping @Sendable (StepEnd) -> Void) -> Void

    init<Output: Sendable>(_ command: Command<Output>) {
        self.command = command
        start = { ended in
            let last = Locked<Output?>(nil)
            command.execute(on: .immediate) { event in
                switch event {
                case .value(let value): last.withLock { $0 = value }
                case .completed: ended(.completed(last.withLock { $0 }))
                case .failed(let error): ended(.failed(error))
                case .cancelled(let error): ended(.cancelled(error))
                }
            }
        }
    }
}
