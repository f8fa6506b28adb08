import CommandCore

// Operator fusion, the combinators' half (the engine's half and the rule for when a stage may be
// fused are in CommandCore's `Inputs/Command+Fusion.swift`).
//
// `a.map(f).filter(p).map(g)` is three nodes as built, each a command of its own. When the last one
// is wired (its run subscribes to its input), it looks at that input: a stateless one-input stage that
// nothing else holds and nobody touched is run inside the consumer's own value handler instead of as
// a node (`g(f(x))` filtered by `p` in one call), and so on upwards, up to ``maxFusedStages`` per node.
// The fused stages are released unrun. What the consumer reports is what it would have reported
// through them: a transform that throws fails it with that error; the upstream's completion and
// failure pass through; an upstream cancel cancels it with an error naming its own input (the stage
// that would have been cancelled first), exactly as through the unfused nodes.
//
// The bound keeps a value's stack depth per node fixed (a 10,000-stage chain is about 313 nodes of 32
// stages, each delivering the next through the engine's bounded in-place delivery), so a thread with a
// 512 KiB stack carries any chain. Measured with `FusionTests`' 10,000-stage chain sent to from a 512
// KiB thread: 32 and 64 pass in a debug build (32 also under AddressSanitizer), 128 overflows; a
// fused stage costs about 80 instructions per value against about 1,400 for a node (callgrind), so 32
// keeps most of the gain with room to spare.

/// The most stateless stages one node runs in its own value handler (itself included).
let maxFusedStages = 32

/// What consumes a value: the next stage's handler, or the node's own send.
@usableFromInline
typealias ValueHandler<Value> = @Sendable (Value) -> Void

/// A stateless stage's transform: given what takes its output and what fails the node running it,
/// what handles one input value.
@usableFromInline
typealias StageTransform<Input, Output> =
    @Sendable (_ next: @escaping ValueHandler<Output>, _ fail: @escaping @Sendable (any Error) -> Void) -> ValueHandler<
        Input
    >

/// The consuming node's side of a fusion: where the fused handler ends up subscribed.
protocol FusionWiring: Sendable {
    /// Fails the consuming node (a fused transform threw).
    func fail(_ error: any Error)

    /// Subscribes the consuming node to `input` with `handler`, or, if `input` is a stage held by
    /// nothing but the caller (`sole`) and `budget` allows, runs that stage ahead of `handler` instead.
    /// `linked`: `input` is not yet among the node's inputs as drawn in pictures.
    func wire<Input: Sendable>(
        _ input: Command<Input>, sole: Bool, value handler: @escaping ValueHandler<Input>, budget: Int, linked: Bool)
}

/// A stateless one-input stage (`map`, `filter`, `compactMap`), kept on its node as its
/// ``Command/fusibleStage``.
class FusibleStage<Output: Sendable>: @unchecked Sendable {
    // No state: subclasses hold immutable values only.

    /// Runs this stage, whose node `node` the caller holds alone (claimed), ahead of `downstream`:
    /// wires `wiring` to the stage's own input. Also how a stage node wires itself when it runs
    /// (`node` is then the consuming node, and its input is already `linked` in pictures).
    func fuse(
        _ node: Command<Output>, ahead downstream: @escaping ValueHandler<Output>, into wiring: any FusionWiring,
        budget: Int, linked: Bool = true
    ) {
        preconditionFailure("FusibleStage.fuse is abstract")
    }
}

/// A stage from `Input` to `Output` by a transform.
final class TransformStage<Input: Sendable, Output: Sendable>: FusibleStage<Output>, @unchecked Sendable {
    // Immutable after init.
    let transform: StageTransform<Input, Output>

    init(_ transform: @escaping StageTransform<Input, Output>) {
        self.transform = transform
    }

    override func fuse(
        _ node: Command<Output>, ahead downstream: @escaping ValueHandler<Output>, into wiring: any FusionWiring,
        budget: Int, linked: Bool = true
    ) {
        let handler = transform(downstream) { error in wiring.fail(error) }
        // A stage holds its input from the moment it is made until it runs.
        guard let (input, sole) = node.takeHeldInput() else { preconditionFailure("a stage holds its input") }
        wiring.wire(
            unsafeDowncast(input, to: Command<Input>.self), sole: sole, value: handler, budget: budget, linked: linked)
    }
}

/// A node's wiring through fused stages: subscribes `link` to the first input that is not fused.
struct Fuser<Result: Sendable>: FusionWiring {
    let link: Link<Result>
    /// The node's own input's name, for the error of an upstream cancel.
    let inputName: String

    func fail(_ error: any Error) { link.fail(error) }

    func wire<Input: Sendable>(
        _ input: Command<Input>, sole: Bool, value handler: @escaping ValueHandler<Input>, budget: Int, linked: Bool
    ) {
        if sole && budget > 0, let stage = input.claimForFusion() {
            unsafeDowncast(stage, to: FusibleStage<Input>.self).fuse(
                input, ahead: handler, into: self, budget: budget - 1)
            return
        }
        link.result.command.hold(input: input, linked: linked)
        link.subscribe(input, value: handler) { [link, inputName] event in
            link.forwardTerminal(event, inputName: inputName)
        }
    }
}
