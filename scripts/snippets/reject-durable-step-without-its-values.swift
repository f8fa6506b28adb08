// must not compile
// expect-error: pack expansion requires that 'Int' and '' have the same shape
// A step after `a` receives the context, then a's value: a closure that takes the context only is
// refused, with this message (the Durable workflows article, "What a step's closure receives").
// `waitingFor: [a]` is the form for an order without values.
import CommandDurable

struct Forgot: DurableWorkflow {
    static let name = "forgot"
    static func build(_ flow: DurableFlow, input: Int) throws -> DurableStep<Int> {
        let a = flow.step("a") { _ in Command.just(input) }
        return flow.step("b", after: a) { context in Command.just(context.attempt) }
    }
}
