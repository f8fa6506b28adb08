import CommandCore

/// A complete HTTP response: what a ``RequestCommand`` or an ``UploadCommand`` sends as its value.
public struct HTTPResponse: Sendable, Equatable {
    /// The status code (200, 404...).
    public let status: Int
    /// The header fields, as the server sent them (names in the server's case; read them with
    /// ``value(forHTTPHeaderField:)``, which ignores case).
    public let headers: [String: String]
    /// The body, whole.
    public let body: Data
    /// The URL the response came from (after redirects), if known.
    public let url: URL?

    public init(status: Int, headers: [String: String] = [:], body: Data = Data(), url: URL? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url
    }

    /// The value of the header field `field`, compared without case, as `HTTPURLResponse` does.
    public func value(forHTTPHeaderField field: String) -> String? {
        HTTPHeaders.value(of: field, in: headers)
    }

    /// True for a status in `200..<300`.
    public var isSuccess: Bool { (200..<300).contains(status) }
}

/// A response whose status is outside `200..<300`: a network command fails with this error itself
/// (`error as? HTTPError` works on the failure, in `catch`, in a retry's `shouldRetry`).
public struct HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The status code (404, 503...).
    public let status: Int
    /// The body the server sent with it (an error page, a JSON problem document).
    public let body: Data
    /// The header fields (read them with ``value(forHTTPHeaderField:)``).
    public let headers: [String: String]
    /// The URL requested.
    public let url: URL?
    /// The name of the command that made the request.
    public let command: String

    public init(
        status: Int, body: Data = Data(), headers: [String: String] = [:], url: URL? = nil, command: String = ""
    ) {
        self.status = status
        self.body = body
        self.headers = headers
        self.url = url
        self.command = command
    }

    /// The value of the header field `field`, compared without case.
    public func value(forHTTPHeaderField field: String) -> String? {
        HTTPHeaders.value(of: field, in: headers)
    }

    public var description: String {
        let reason = HTTPURLResponse.localizedString(forStatusCode: status)
        let target = url.map { " for \($0.absoluteString)" } ?? ""
        let who = command.isEmpty ? "" : " ('\(command)')"
        return "HTTP \(status) \(reason)\(target)\(who): the server refused or failed the request; "
            + "read `body` for its explanation (\(body.count) bytes)."
    }
}

enum HTTPHeaders {
    static func value(of field: String, in headers: [String: String]) -> String? {
        if let exact = headers[field] { return exact }
        let wanted = field.lowercased()
        return headers.first { $0.key.lowercased() == wanted }?.value
    }

    /// `HTTPURLResponse.allHeaderFields` as strings.
    static func strings(of response: HTTPURLResponse) -> [String: String] {
        var headers: [String: String] = [:]
        for (key, value) in response.allHeaderFields {
            headers["\(key)"] = "\(value)"
        }
        return headers
    }
}
