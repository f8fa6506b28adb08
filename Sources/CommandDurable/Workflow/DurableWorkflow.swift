/// A workflow whose steps are recorded: a pure function from its input to a graph of steps.
///
/// ```swift
/// struct UploadPhoto: DurableWorkflow {
///     static let name = "upload-photo"
///     struct Input: Codable, Sendable { var photo: URL; var album: String }
///
///     static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Receipt> {
///         let resized = flow.step("resize") { _ in ResizeCommand(input.photo, width: 2048) }
///         let token = flow.step("token", retry: .attempts(3, backoff: .exponential(initial: .seconds(1)))) { _ in
///             TokenCommand()
///         }
///         return flow.step("upload", after: resized, token) { context, file, token in
///             UploadCommand(file, token: token, idempotencyKey: context.idempotencyKey)
///         }
///     }
/// }
/// ```
///
/// ``build(_:input:)`` runs when a run starts and again at every resume (in this process or another):
/// it must make the same step ids for the same input, and do nothing else (no I/O, no side effect:
/// the steps do the work). Its steps' closures are never stored; the store keeps the input, each step's
/// state, attempts and value. ``name`` is how runs are stored: keep it across releases (a changed
/// workflow keeps its step ids, or takes a new name).
public protocol DurableWorkflow: Sendable {
    /// What a run is started with, stored encoded (JSON).
    associatedtype Input: Codable & Sendable
    /// The run's value: the value of the step ``build(_:input:)`` returns.
    associatedtype Output: Sendable

    /// The stable name runs of this workflow are stored by.
    static var name: String { get }

    /// Makes the run's steps with `flow`, from `input`; returns the step whose value is the run's.
    static func build(_ flow: DurableFlow, input: Input) throws -> DurableStep<Output>
}
