import Foundation

extension Command {
    /// The last value the command sent before completing, awaited without blocking a thread.
    ///
    /// Executes the command if needed (like `execute`). Throws the command's error if it failed,
    /// ``CommandError`` with code ``CommandError/Code/noValue`` if it completed without a value, and
    /// `CancellationError` if it was cancelled. Cancelling the awaiting task cancels the command;
    /// cancelling the command ends the await.
    public var value: Output {
        get async throws {
            let last = Locked<Output?>(nil)
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Output, any Error>) in
                    execute(on: .immediate) { [self] event in
                        switch event {
                        case .value(let value):
                            last.withLock { $0 = value }
                        case .completed:
                            if let value = last.withLock({ $0 }) {
                                continuation.resume(returning: value)
                            } else {
                                continuation.resume(throwing: CommandError.noValue(displayName))
                            }
                        case .failed(let error):
                            continuation.resume(throwing: error)
                        case .cancelled:
                            continuation.resume(throwing: CancellationError())
                        }
                    }
                }
            } onCancel: {
                cancel()
            }
        }
    }

    /// Every value of the command as an `AsyncThrowingStream` (unbounded buffer: nothing is dropped).
    ///
    /// Executes the command if needed. The stream finishes when the command completes, throws its
    /// error if it failed, and `CancellationError` if it was cancelled. Ending the iteration early
    /// (a `break`, or cancelling the iterating task) cancels the command.
    public var values: AsyncThrowingStream<Output, any Error> {
        AsyncThrowingStream { continuation in
            continuation.onTermination = { [self] termination in
                if case .cancelled = termination { cancel() }
            }
            execute(on: .immediate) { event in
                switch event {
                case .value(let value): continuation.yield(value)
                case .completed: continuation.finish()
                case .failed(let error): continuation.finish(throwing: error)
                case .cancelled: continuation.finish(throwing: CancellationError())
                }
            }
        }
    }

    /// A command whose work is an `async` closure, run in a `Task` that cancelling the command
    /// cancels. Returning without a terminal event completes the command; throwing fails it.
    ///
    /// ```swift
    /// let fetch = Command<Data>(async: { result in
    ///     for try await chunk in stream { result.send(chunk) }
    /// })
    /// ```
    ///
    /// A trailing closure that uses `await` picks this form too (`Command<Int> { result in try await
    /// ...; result.send(1) }`). One without `await` picks a synchronous form: `Command { result in
    /// ...; return cancelable }`, or, with no `return`, the form that waits for the terminal event the
    /// closure (or work it started) sends, so work started for later and a forgotten `return nil` never
    /// complete the command early.
    public convenience init(async body: @escaping @Sendable (CommandResult<Output>) async throws -> Void) {
        self.init(
            Self.inTask { result in
                try await body(result)
                result.complete()
            })
    }

    /// A command with one value, the result of an `async` function: `Command { try await fetch() }`.
    /// Cancelling the command cancels the task.
    public convenience init(_ operation: @escaping @Sendable () async throws -> Output) {
        // `succeed` sends and completes: nothing is sent after it (no `complete()` after the end).
        self.init(Self.inTask { result in result.succeed(try await operation()) })
    }

    /// A run closure that runs `body` in a `Task` (cancelled by the command's cancel); a throw fails
    /// the command unless it was cancelled.
    private static func inTask(
        _ body: @escaping @Sendable (CommandResult<Output>) async throws -> Void
    ) -> @Sendable (CommandResult<Output>) -> (any Cancelable)? {
        { result in
            let task = Task {
                do {
                    try await body(result)
                } catch {
                    if !result.isCancelled { result.fail(error) }
                }
            }
            return BlockCancelable { task.cancel() }
        }
    }
}
