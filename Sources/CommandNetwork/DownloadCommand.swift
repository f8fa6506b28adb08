import CommandCore

/// Downloads a URL into a file: sends the file's URL (`destination`) and completes.
///
/// ```swift
/// let file = DownloadCommand(url: url, to: destination)   // Command<URL>
/// ```
///
/// **Outcome.** A status in `200..<300`: the body is written, as it arrives, to a temporary file
/// beside nothing of yours, then moved to `destination` (replacing a file there) when the response is
/// whole; the value is `destination`. Another status: fails with ``HTTPError`` (its `body` is the
/// server's explanation; `destination` is not touched). A transport failure: its `URLError`; the
/// temporary file is removed.
///
/// **Progress.** `progress` follows the bytes received out of the `Content-Length`
/// (indeterminate without one), so a `Graph` or `GroupCommand` of downloads adds them up.
///
/// **Cancel.** As ``RequestCommand``: the task is cancelled, the command ends cancelled at once, the
/// temporary file is removed and `destination` is not touched.
open class DownloadCommand: Command<URL>, @unchecked Sendable {
    // `@unchecked Sendable`: its own stored properties are immutable; the rest is `Command`'s.

    /// The request sent.
    public let request: URLRequest
    /// Where the file goes.
    public let destination: URL

    /// Downloads `url` into `destination`.
    public convenience init(url: URL, to destination: URL) {
        self.init(request: URLRequest(url: url), to: destination)
    }

    /// Downloads what `request` returns into `destination`.
    public init(request: URLRequest, to destination: URL) {
        self.request = request
        self.destination = destination
        super.init()
        name = "download " + RequestCommand.describe(request)
    }

    open override func run(_ result: CommandResult<URL>) -> (any Cancelable)? {
        let command = displayName
        let destination = destination
        let temporary = FileManager.default.temporaryDirectory
            .appendingPathComponent("AwesomeCommand-\(UUID().uuidString).download")
        let transfer = Transfer(
            direction: .receiving, toFile: temporary, report: { result.reportProgress(completed: $0, of: $1) },
            finish: { ending in
                switch ending {
                case .file(_, let file):
                    // A file only for a status in 200..<300 (`Transfer.didReceive(_:)`).
                    do {
                        if FileManager.default.fileExists(atPath: destination.path) {
                            try FileManager.default.removeItem(at: destination)
                        }
                        try FileManager.default.moveItem(at: file, to: destination)
                        result.succeed(destination)
                    } catch {
                        try? FileManager.default.removeItem(at: file)
                        result.fail(error)
                    }
                case .response(let response, let body):
                    // Only an error status keeps the body in memory: it is the server's explanation.
                    result.fail(HTTPError(response, body: body, command: command))
                case .failed(let error):
                    result.fail(error)
                }
            })
        let task = SessionRouter.session.dataTask(with: request)
        SessionRouter.shared.start(task, transfer)
        return BlockCancelable { task.cancel() }
    }
}
