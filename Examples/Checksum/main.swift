// swift run Checksum [PATH] [--manifest FILE]
//
// A real workflow on real data: list the files under PATH (default: the current directory), hash each
// one in parallel (at most twice the core count at once), and combine the results into a manifest,
// with a progress bar on the terminal. Ctrl-C cancels the graph: the hashing commands stop, nothing
// more is printed, and the tool exits with status 130.
//
// The checksum is 64-bit FNV-1a (fast and dependency-free; not a cryptographic hash).
import CommandGraph
import Dispatch
import Foundation

var arguments = Array(CommandLine.arguments.dropFirst())
let manifestPath: String? = {
    guard let index = arguments.firstIndex(of: "--manifest"), index + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(index...(index + 1)) }
    return arguments[index + 1]
}()
let root = URL(fileURLWithPath: arguments.first ?? FileManager.default.currentDirectoryPath).standardizedFileURL

struct Entry: Sendable {
    let path: String
    let size: Int
    let checksum: UInt64
}

/// Lists the regular files under `root`, skipping hidden ones and build folders.
let list = Command<[String]> { result in
    var files: [String] = []
    let enumerator = FileManager.default.enumerator(
        at: root, includingPropertiesForKeys: [.isRegularFileKey], options: [.skipsHiddenFiles])
    while let url = enumerator?.nextObject() as? URL {
        if url.lastPathComponent.hasPrefix(".build") {
            enumerator?.skipDescendants()
            continue
        }
        if (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true { files.append(url.path) }
        if result.isCancelled { return nil }
    }
    result.succeed(files.sorted())
    return nil
}
list.name = "list"

/// Hashes one file in 64 KiB chunks, stopping early when cancelled.
func hash(_ path: String) -> Command<Entry> {
    Command<Entry> { result in
        guard let handle = FileHandle(forReadingAtPath: path) else {
            result.succeed(Entry(path: path, size: 0, checksum: 0))
            return nil
        }
        defer { try? handle.close() }
        var checksum: UInt64 = 0xcbf2_9ce4_8422_2325
        var size = 0
        while !result.isCancelled, let chunk = try? handle.read(upToCount: 65_536), !chunk.isEmpty {
            size += chunk.count
            for byte in chunk {
                checksum ^= UInt64(byte)
                checksum &*= 0x100_0000_01b3
            }
        }
        result.succeed(Entry(path: path, size: size, checksum: checksum))
        return nil
    }
}

/// Progress and results, touched only on the main queue (where the callbacks below run).
final class Manifest: @unchecked Sendable {
    var total = 0
    var entries: [Entry] = []
    var bytes = 0

    func drawProgress() {
        let width = 30
        let done = total == 0 ? width : entries.count * width / total
        let bar = String(repeating: "#", count: done) + String(repeating: ".", count: width - done)
        FileHandle.standardError.write(Data("\r[\(bar)] \(entries.count)/\(total) files".utf8))
    }
}
let manifest = Manifest()
let parallel = ProcessInfo.processInfo.activeProcessorCount * 2

/// list -> each path -> hash (at most `parallel` at once, the rest queued in order).
let paths =
    list
    .handleEvents(value: { files in DispatchQueue.main.async { manifest.total = files.count } })
    .flatMap { files in
        Command<String> { result in
            for file in files { result.send(file) }
            result.complete()
            return nil
        }
    }
let graph = paths.flatMap(maxConcurrent: parallel) { hash($0) }
graph.name = "checksum"

// Ctrl-C cancels the whole graph.
signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
interrupt.setEventHandler { graph.cancel() }
interrupt.resume()

print("Checksumming \(root.path)")
graph.execute(on: .main) { event in
    switch event {
    case .value(let entry):
        manifest.entries.append(entry)
        manifest.bytes += entry.size
        manifest.drawProgress()
    case .completed:
        manifest.drawProgress()
        FileHandle.standardError.write(Data("\n".utf8))
        let lines = manifest.entries.sorted { $0.path < $1.path }.map {
            String(format: "%016llx  %10d  %@", $0.checksum, $0.size, String($0.path.dropFirst(root.path.count + 1)))
        }
        let combined = manifest.entries.reduce(UInt64(0)) { $0 ^ $1.checksum }
        if let manifestPath {
            try? (lines.joined(separator: "\n") + "\n").write(toFile: manifestPath, atomically: true, encoding: .utf8)
            print("manifest written to \(manifestPath)")
        } else {
            for line in lines.prefix(5) { print(line) }
            if lines.count > 5 { print("... \(lines.count - 5) more") }
        }
        print(
            String(
                format: "%d files, %d bytes, combined checksum %016llx", manifest.entries.count, manifest.bytes,
                combined))
        exit(0)
    case .failed(let error):
        print("\nfailed: \(error)")
        exit(1)
    case .cancelled:
        FileHandle.standardError.write(
            Data("\ncancelled (Ctrl-C): \(manifest.entries.count) of \(manifest.total) files hashed\n".utf8))
        exit(130)
    }
}
dispatchMain()
