import CommandCore

/// One request's bytes on their way: collected in memory (a request, an upload's response) or written
/// to a file as they arrive (a download), with the progress of the direction that matters. Built by
/// a network command's `run`; told of its task's events by ``SessionRouter`` on the session's serial
/// delegate queue, and finishes the command's run once.
final class Transfer: @unchecked Sendable {
    // `@unchecked Sendable`: every mutable field is touched only on the library session's delegate
    // queue, which URLSession runs serially (one callback at a time, in order), or before the task
    // was resumed.

    /// What the transfer reports progress on.
    enum Direction {
        case receiving
        case sending
    }

    /// How the transfer ended, once.
    enum Ending {
        /// The whole body in memory: a transfer without a file, or a download's error status.
        case response(HTTPURLResponse, body: Data)
        /// A download's body, written to its file (a status in 200..<300 only).
        case file(HTTPURLResponse, URL)
        case failed(any Error)
    }

    private let direction: Direction
    private let report: @Sendable (Int64, Int64) -> Void
    private let finish: @Sendable (Ending) -> Void
    /// Where a download writes (a temporary file, moved into place by the command), or nil.
    private let fileURL: URL?
    private var file: FileHandle?
    private var body = Data()
    private var received: Int64 = 0
    private var sent: Int64 = 0
    private var expected: Int64 = -1
    /// A download whose status is an error keeps the body in memory (it is the explanation, not the file).
    private var collectsInMemory: Bool
    private var writeError: (any Error)?

    init(
        direction: Direction, toFile fileURL: URL? = nil, report: @escaping @Sendable (Int64, Int64) -> Void,
        finish: @escaping @Sendable (Ending) -> Void
    ) {
        self.direction = direction
        self.fileURL = fileURL
        self.collectsInMemory = fileURL == nil
        self.report = report
        self.finish = finish
    }

    func didReceive(_ response: URLResponse) {
        expected = response.expectedContentLength
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard let fileURL, (200..<300).contains(status) else {
            collectsInMemory = true
            return
        }
        do {
            guard FileManager.default.createFile(atPath: fileURL.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: fileURL.path])
            }
            file = try FileHandle(forWritingTo: fileURL)
            collectsInMemory = false
        } catch {
            writeError = error
        }
    }

    func didReceive(_ data: Data) {
        received += Int64(data.count)
        if collectsInMemory {
            body.append(data)
        } else if let file, writeError == nil {
            do { try file.write(contentsOf: data) } catch { writeError = error }
        }
        if direction == .receiving { report(received, expected) }
    }

    /// `bytes` more were sent. Counted here from the increments: Linux's URLSession reads the running
    /// total when it calls the delegate, not when the bytes went out, so a busy delegate queue saw only
    /// the final total.
    func didSend(_ bytes: Int64, of expected: Int64) {
        sent += bytes
        if direction == .sending { report(min(sent, expected > 0 ? expected : sent), expected) }
    }

    func didComplete(_ response: URLResponse?, error: (any Error)?) {
        try? file?.close()
        file = nil
        if let error = error ?? writeError {
            removeFile()
            return finish(.failed(error))
        }
        guard let response = response as? HTTPURLResponse else {
            removeFile()
            return finish(.failed(URLError(.badServerResponse)))
        }
        if let fileURL, !collectsInMemory {
            finish(.file(response, fileURL))
        } else {
            removeFile()
            finish(.response(response, body: body))
        }
    }

    private func removeFile() {
        if let fileURL { try? FileManager.default.removeItem(at: fileURL) }
    }
}

/// The library's own URLSession (default configuration) and its delegate: routes each task's events
/// to its ``Transfer`` by task identifier. A delegate is what reports bytes as they arrive and as they
/// are sent on every platform (a task's own `delegate` is not honoured by Linux's URLSession).
final class SessionRouter: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // `@unchecked Sendable`: its one mutable table is guarded by `transfers`' lock.

    static let shared = SessionRouter()
    /// The session: its delegate queue is URLSession's own serial one.
    static let session = URLSession(configuration: .default, delegate: shared, delegateQueue: nil)

    // Guards the table of transfers under way, by task identifier.
    private let transfers = Locked<[Int: Transfer]>([:])

    /// Registers `transfer` for `task`, then resumes it.
    func start(_ task: URLSessionTask, _ transfer: Transfer) {
        transfers.withLock { $0[task.taskIdentifier] = transfer }
        task.resume()
    }

    private func transfer(_ task: URLSessionTask) -> Transfer? {
        transfers.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        transfer(dataTask)?.didReceive(response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        transfer(dataTask)?.didReceive(data)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        transfer(task)?.didSend(bytesSent, of: totalBytesExpectedToSend)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let transfer = transfers.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        transfer?.didComplete(task.response, error: error)
    }
}

extension HTTPResponse {
    init(_ response: HTTPURLResponse, body: Data) {
        self.init(
            status: response.statusCode, headers: HTTPHeaders.strings(of: response), body: body, url: response.url)
    }
}

extension HTTPError {
    init(_ response: HTTPURLResponse, body: Data, command: String) {
        self.init(
            status: response.statusCode, body: body, headers: HTTPHeaders.strings(of: response), url: response.url,
            command: command)
    }
}

enum ResponseDelivery {
    /// Ends `result` with a whole response: its value for a status in `200..<300`, else an
    /// ``HTTPError``; a transport error as it is (a `URLError`).
    static func respond(_ ending: Transfer.Ending, to result: CommandResult<HTTPResponse>, command: String) {
        switch ending {
        case .response(let response, let body):
            if (200..<300).contains(response.statusCode) {
                result.succeed(HTTPResponse(response, body: body))
            } else {
                result.fail(HTTPError(response, body: body, command: command))
            }
        case .file:
            preconditionFailure("a transfer without a file to write ended with one")
        case .failed(let error):
            result.fail(error)
        }
    }
}
