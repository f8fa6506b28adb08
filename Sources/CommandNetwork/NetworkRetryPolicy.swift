import CommandCore
import CommandGraph

/// Retry rules for network commands, as `shouldRetry` functions of `Command.retry(_:delay:scheduler:shouldRetry:_:)`.
///
/// ```swift
/// let robust = Command<HTTPResponse>.retry(3, delay: .exponential(initial: .milliseconds(200), jitter: 0.2),
///                                          shouldRetry: NetworkRetryPolicy.transientFailures) { _ in RequestCommand(url: url) }
/// ```
public enum NetworkRetryPolicy {
    /// The HTTP statuses retried: 408 Request Timeout, 429 Too Many Requests, 500 Internal Server
    /// Error, 502 Bad Gateway, 503 Service Unavailable, 504 Gateway Timeout (Alamofire's
    /// `RetryPolicy` defaults).
    public static let retryableStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// The `URLError` codes retried: a timeout, a host that cannot be found or reached, a connection
    /// lost, no network, a DNS failure (Alamofire's defaults among the transient ones).
    public static let retryableURLErrors: Set<URLError.Code> = [
        .timedOut, .cannotFindHost, .cannotConnectToHost, .networkConnectionLost, .notConnectedToInternet,
        .dnsLookupFailed,
    ]

    /// Retries the transient failures and nothing else:
    ///
    /// | Failure | Decision |
    /// |---|---|
    /// | ``HTTPError`` with a status in ``retryableStatuses`` and a `Retry-After` of N seconds | `.retryWithDelay(.seconds(N))` |
    /// | ``HTTPError`` with a status in ``retryableStatuses`` | `.retry` (the retry's `delay`) |
    /// | ``HTTPError`` with another status (400, 401, 403, 404...) | `.doNotRetry` |
    /// | `URLError` with a code in ``retryableURLErrors`` | `.retry` |
    /// | anything else (a cancel, a `DecodingError`, another `URLError`) | `.doNotRetry` |
    ///
    /// `Retry-After` is read in seconds (a non-negative integer); an HTTP date there is ignored (the
    /// retry's own `delay` applies).
    @Sendable
    public static func transientFailures(_ failure: RetryFailure) -> RetryDecision {
        decision(for: failure.error)
    }

    /// The decision ``transientFailures(_:)`` makes for `error`.
    public static func decision(for error: any Error) -> RetryDecision {
        if let http = error as? HTTPError {
            guard retryableStatuses.contains(http.status) else { return .doNotRetry }
            if let after = http.value(forHTTPHeaderField: "Retry-After")?.trimmingCharacters(in: .whitespaces),
                let seconds = Int(after), seconds >= 0
            {
                return .retryWithDelay(.seconds(seconds))
            }
            return .retry
        }
        if let url = error as? URLError, retryableURLErrors.contains(url.code) { return .retry }
        return .doNotRetry
    }
}
