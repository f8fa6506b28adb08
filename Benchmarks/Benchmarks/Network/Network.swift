// Suite: network requests on loopback. Sequential round trips to one `LoopbackHTTPServer` (a 64-byte
// body, kept-alive connections), each waited for: a `RequestCommand` next to the bare URLSession data
// task it wraps, in the same run. Two pairs: the library's own session (a delegate session, which
// reports progress) against a bare delegate session, and a session of yours (`.shared`, completion
// handler) against the same bare completion-handler task. The ratio is the command's overhead per
// request; the absolute figures are mostly URLSession and the loopback (libcurl on Linux).
import Benchmark
import CommandNetwork
import CommandNetworkTesting
import Dispatch
import Foundation

let server: LoopbackHTTPServer = {
    do {
        return try LoopbackHTTPServer { _ in .response(status: 200, body: Data(repeating: 7, count: 64)) }
    } catch {
        fatalError("the loopback server did not start: \(error)")
    }
}()
let url = server.url("/item")

/// A bare delegate session: what the library's own session is, without the command.
final class BareDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // `@unchecked Sendable`: `done` is set before each task resumes and read on the session's serial
    // delegate queue; `body` is only touched there.
    var done: DispatchSemaphore?
    var body = Data()

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) { body.append(data) }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        blackHole(body.count)
        body = Data()
        done?.signal()
    }
}

let bareDelegate = BareDelegate()
let bareSession = URLSession(configuration: .default, delegate: bareDelegate, delegateQueue: nil)

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput], scalingFactor: .one, maxDuration: .seconds(3))

    Benchmark("Network: RequestCommand, the library's session, sequential") { benchmark in
        for _ in benchmark.scaledIterations {
            let done = DispatchSemaphore(value: 0)
            RequestCommand(url: url).execute(on: .immediate) { event in
                if event.isTerminal { done.signal() }
            }
            done.wait()
        }
    }

    Benchmark("Baseline: URLSession delegate data task, sequential") { benchmark in
        for _ in benchmark.scaledIterations {
            let done = DispatchSemaphore(value: 0)
            bareDelegate.done = done
            bareSession.dataTask(with: url).resume()
            done.wait()
        }
    }

    Benchmark("Network: RequestCommand, session .shared, sequential") { benchmark in
        for _ in benchmark.scaledIterations {
            let done = DispatchSemaphore(value: 0)
            RequestCommand(url: url, session: .shared).execute(on: .immediate) { event in
                if event.isTerminal { done.signal() }
            }
            done.wait()
        }
    }

    Benchmark("Baseline: URLSession.shared data task with completion handler, sequential") { benchmark in
        for _ in benchmark.scaledIterations {
            let done = DispatchSemaphore(value: 0)
            URLSession.shared.dataTask(with: url) { data, _, _ in
                blackHole(data?.count ?? 0)
                done.signal()
            }.resume()
            done.wait()
        }
    }
}
