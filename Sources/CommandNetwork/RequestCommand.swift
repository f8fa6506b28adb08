import CommandCore
import CommandGraph

/// An HTTP request as a command (the original library's `MGJRequestCommand`, "Advanced
/// NSOperations"' `URLSessionTaskOperation`): sends one ``HTTPResponse`` and completes.
///
/// ```swift
/// let get = RequestCommand(url: url)                                  // GET
/// let post = RequestCommand(request: urlRequest, session: .shared)    // any URLRequest, any URLSession
/// let user = RequestCommand(url: url).decoding(User.self)             // Command<User>
/// ```
///
/// **Outcome.** A status in `200..<300`: the response (status, headers, whole body) as the value,
/// then completion. Another status: fails with ``HTTPError`` (status, body, headers) as the error
/// itself. A transport failure (no server, connection lost, timeout): fails with its `URLError`, as
/// URLSession reported it.
///
/// **Where.** The request starts on the command's own queue when it runs; the value and the end are
/// delivered to your callbacks on the context you executed from, as for any command.
///
/// **Cancel.** `cancel()`, the execute token or a cancelled dependency cancels the `URLSessionTask`,
/// and the command ends cancelled at once; nothing is delivered after.
///
/// **Progress.** Without a `session` (the default), the library's own session reports the bytes
/// received as they arrive (`progress`: bytes of the `Content-Length`, indeterminate
/// without one). With a session of yours, URLSession's completion handler is used and the progress
/// completes at the end (Linux's URLSession does not honour a task's own delegate).
open class RequestCommand: Command<HTTPResponse>, @unchecked Sendable {
    // `@unchecked Sendable`: its own stored properties are immutable; the rest is `Command`'s.

    /// The request sent, every time the command runs.
    public let request: URLRequest
    /// The session of yours it is sent with, or nil for the library's own.
    public let session: URLSession?

    /// A request for `url`, with `method` (default GET).
    public convenience init(url: URL, method: String = "GET", session: URLSession? = nil) {
        var request = URLRequest(url: url)
        request.httpMethod = method
        self.init(request: request, session: session)
    }

    /// `request` as it is, sent with `session` (nil: the library's own session, which reports progress).
    public init(request: URLRequest, session: URLSession? = nil) {
        self.request = request
        self.session = session
        super.init()
        name = Self.describe(request)
    }

    static func describe(_ request: URLRequest) -> String {
        "\(request.httpMethod ?? "GET") \(request.url?.absoluteString ?? "(no URL)")"
    }

    open override func run(_ result: CommandResult<HTTPResponse>) -> (any Cancelable)? {
        let command = displayName
        let task: URLSessionTask
        if let session {
            task = session.dataTask(with: request) { data, response, error in
                if let error { return result.fail(error) }
                guard let response = response as? HTTPURLResponse else {
                    return result.fail(URLError(.badServerResponse))
                }
                ResponseDelivery.respond(.response(response, body: data ?? Data()), to: result, command: command)
            }
            task.resume()
        } else {
            let transfer = Transfer(
                direction: .receiving, report: { result.reportProgress(completed: $0, of: $1) },
                finish: { ResponseDelivery.respond($0, to: result, command: command) })
            task = SessionRouter.session.dataTask(with: request)
            SessionRouter.shared.start(task, transfer)
        }
        return BlockCancelable { task.cancel() }
    }
}

extension Command where Output == HTTPResponse {
    /// Decodes each response's body as `type` with `decoder` (a `JSONDecoder` by default).
    ///
    /// *Emits:* the decoded value. *Fails:* with the request's error, or the `DecodingError` itself
    /// when the body does not decode. *Cancels:* the request when the node is cancelled.
    public func decoding<Value: Decodable & Sendable>(
        _ type: Value.Type, decoder: JSONDecoder = JSONDecoder()
    ) -> Command<Value> {
        map { response in try decoder.decode(Value.self, from: response.body) }
    }
}
