import CommandCore

/// Uploads a body: sends the server's ``HTTPResponse`` and completes.
///
/// ```swift
/// let sent = UploadCommand(request: urlRequest, body: data)   // Command<HTTPResponse>
/// ```
///
/// The request's method is used, POST when it says GET (a `URLRequest`'s default). **Outcome** as
/// ``RequestCommand`` (the response to the upload). **Progress:** `progress` follows the
/// bytes sent out of the body's size. **Cancel:** as ``RequestCommand``.
open class UploadCommand: Command<HTTPResponse>, @unchecked Sendable {
    // `@unchecked Sendable`: its own stored properties are immutable; the rest is `Command`'s.

    /// The request sent (its method POST if it said GET).
    public let request: URLRequest
    /// The body uploaded.
    public let body: Data

    public init(request: URLRequest, body: Data) {
        var request = request
        if (request.httpMethod ?? "GET") == "GET" { request.httpMethod = "POST" }
        self.request = request
        self.body = body
        super.init()
        name = "upload " + RequestCommand.describe(request)
    }

    open override func run(_ result: CommandResult<HTTPResponse>) -> (any Cancelable)? {
        let command = displayName
        let transfer = Transfer(
            direction: .sending, report: { result.reportProgress(completed: $0, of: $1) },
            finish: { ResponseDelivery.respond($0, to: result, command: command) })
        let task = SessionRouter.session.uploadTask(with: request, from: body)
        SessionRouter.shared.start(task, transfer)
        return BlockCancelable { task.cancel() }
    }
}
