import CommandCore

// Stateless one-input operators. For each: values are handled on the thread the input delivered
// them on (`.immediate`, no hop); a throwing closure fails the node with its error and cancels the
// input (if no other consumer needs it); cancelling the node cancels the input likewise. `map`,
// `filter` and `compactMap` that nothing else holds run inside the node consuming them (operator
// fusion, `Node/Fusion.swift`): the same events, without a node per stage. `map` and `compactMap`
// are `@inlinable`, so that the closure handling each value is compiled where the caller's types are
// known: made inside the library, it moved each result through a buffer whose size is looked up at
// run time (a kept `map` stage 291 -> 278 instructions a value, a fused one 81 -> 66). `filter` is
// not: it hands on the value it was given, and compiled in the caller it converted the value to and
// from the library's generic form on every call (`filtermap` 397 -> 416 instructions).

extension Command {
    /// Transforms each value.
    ///
    /// *Emits:* `transform(value)` for each value. *Completes:* when this command completes.
    /// *Fails:* when this command fails, or `transform` throws (with its error).
    /// *Cancels:* this command when the node is cancelled (unless another consumer needs it).
    @inlinable
    public func map<Result: Sendable>(_ transform: @escaping @Sendable (Output) throws -> Result) -> Command<Result> {
        stage("map") { next, fail in
            { value in
                do { next(try transform(value)) } catch { fail(error) }
            }
        }
    }

    /// Passes the values `isIncluded` accepts.
    ///
    /// *Emits:* each value for which `isIncluded` is true. *Completes:* when this command completes.
    /// *Fails:* when this command fails, or `isIncluded` throws. *Cancels:* as ``map(_:)``.
    public func filter(_ isIncluded: @escaping @Sendable (Output) throws -> Bool) -> Command<Output> {
        stage("filter") { next, fail in
            { value in
                do { if try isIncluded(value) { next(value) } } catch { fail(error) }
            }
        }
    }

    /// Transforms each value and drops the nils.
    ///
    /// *Emits:* each non-nil `transform(value)`. *Completes:* when this command completes.
    /// *Fails:* when this command fails, or `transform` throws. *Cancels:* as ``map(_:)``.
    @inlinable
    public func compactMap<Result: Sendable>(
        _ transform: @escaping @Sendable (Output) throws -> Result?
    ) -> Command<Result> {
        stage("compactMap") { next, fail in
            { value in
                do { if let mapped = try transform(value) { next(mapped) } } catch { fail(error) }
            }
        }
    }

    /// Drops every value; keeps the terminal event.
    ///
    /// *Emits:* nothing. *Completes:* when this command completes. *Fails:* when it fails.
    /// *Cancels:* as ``map(_:)``.
    public func ignoreValues() -> Command<Output> {
        unary("ignoreValues") { link, input in
            { event in if event.isTerminal { link.forwardTerminal(event, from: input) } }
        }
    }

    /// Runs side effects for each event, then passes it on unchanged (ReactiveCocoa's `doNext:`,
    /// `doCompleted:`, `doError:`). The closures run on the thread the event arrived on, before the
    /// event is passed on.
    ///
    /// *Emits / Completes / Fails:* as this command. *Cancels:* as ``map(_:)``.
    public func handleEvents(
        value: (@Sendable (Output) -> Void)? = nil, completed: (@Sendable () -> Void)? = nil,
        failed: (@Sendable (any Error) -> Void)? = nil, cancelled: (@Sendable (CommandError) -> Void)? = nil
    ) -> Command<Output> {
        unary("handleEvents") { link, input in
            { event in
                switch event {
                case .value(let element):
                    value?(element)
                    link.send(element)
                case .completed: completed?()
                case .failed(let error): failed?(error)
                case .cancelled(let error): cancelled?(error)
                }
                link.forwardTerminal(event, from: input)
            }
        }
    }
}
