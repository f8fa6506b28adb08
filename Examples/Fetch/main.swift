// swift run Fetch [URL...]
//
// Downloads files in a graph, with a progress bar for the whole batch (the graph's progress adds up
// each download's bytes). With no argument, it serves a few files on 127.0.0.1 itself (a loopback
// server, nothing leaves the machine) and fetches those; with URLs, it fetches them.
// Then a request decoded as JSON, and a request retried on a transient failure.
import CommandGraph
import CommandNetwork
import CommandNetworkTesting
import Dispatch
import Foundation

struct Manifest: Codable, Sendable {
    let files: [String]
}

let arguments = Array(CommandLine.arguments.dropFirst())
var server: LoopbackHTTPServer?
var urls = arguments.compactMap(URL.init(string:))
if urls.isEmpty {
    // Four files of 1 to 4 MiB, and a manifest listing them.
    let files = (1...4).map { index in ("file\(index).bin", Data(repeating: UInt8(index), count: index * 1024 * 1024)) }
    let manifest = try JSONEncoder().encode(Manifest(files: files.map(\.0)))
    let busy = Locked(true)
    let local = try LoopbackHTTPServer { request in
        if request.path == "/manifest.json" { return .response(status: 200, body: manifest) }
        if request.path == "/flaky" {
            // The first answer is a 503 asking to come back at once; the next one succeeds.
            let first = busy.withLock { wasBusy in
                defer { wasBusy = false }
                return wasBusy
            }
            return first
                ? .response(status: 503, headers: ["Retry-After": "0"]) : .response(status: 200, body: Data("ok".utf8))
        }
        guard let file = files.first(where: { "/" + $0.0 == request.path }) else { return .response(status: 404) }
        return .response(status: 200, body: file.1)
    }
    server = local
    let listed = try await RequestCommand(url: local.url("/manifest.json")).decoding(Manifest.self).value
    print("serving \(listed.files.count) files on 127.0.0.1:\(local.port) (manifest decoded: \(listed.files))")
    urls = listed.files.map { local.url("/" + $0) }
}

let folder = FileManager.default.temporaryDirectory.appendingPathComponent("Fetch-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }

let graph = Graph()
let printer = DispatchQueue(label: "progress bar")
let lastShown = Locked(-1)
func showProgress() {
    // In steps of 10%: one line per step.
    let percent = Int(graph.fractionCompleted * 10) * 10
    guard
        lastShown.withLock({ shown in
            defer { shown = max(shown, percent) }
            return percent > shown
        })
    else { return }
    let filled = percent / 5
    printer.async {
        print(
            "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: 20 - filled) + "] \(percent)%")
    }
}
let downloads = urls.enumerated().map { index, url in
    let name = url.lastPathComponent.isEmpty ? "download\(index)" : url.lastPathComponent
    let download = DownloadCommand(url: url, to: folder.appendingPathComponent("\(index)-\(name)"))
    download.add(observer: BlockObserver(didReportProgress: { _, _, _ in showProgress() }))
    return download
}
for download in downloads { try graph.add(download) }
let started = DispatchTime.now().uptimeNanoseconds
try graph.run(on: .immediate)
let outcome = await graph.outcome
let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
printer.sync {}
for download in downloads {
    switch download.state {
    case .completed:
        let size = (try? FileManager.default.attributesOfItem(atPath: download.destination.path)[.size] as? Int) ?? 0
        print("ok     \(download.request.url!.absoluteString): \(size) bytes")
    case .failed(let error), .cancelled(let error as any Error):
        print("failed \(download.request.url!.absoluteString): \(error)")
    default:
        print("?      \(download.request.url!.absoluteString)")
    }
}
print(String(format: "%d of %d downloads in %.2f s", outcome.completed.count, downloads.count, seconds))

if let server {
    let flaky = server.url("/flaky")
    let response = try await Command<HTTPResponse>.retry(
        2, delay: .exponential(initial: .milliseconds(50)), shouldRetry: NetworkRetryPolicy.transientFailures
    ) { attempt in
        print("request \(flaky.path), attempt \(attempt.number)\(attempt.lastError.map { " after \($0)" } ?? "")")
        return RequestCommand(url: flaky)
    }.value
    print("retried: HTTP \(response.status), \(String(decoding: response.body, as: UTF8.self))")
    server.stop()
    guard outcome.succeeded, response.status == 200 else { exit(1) }
}
