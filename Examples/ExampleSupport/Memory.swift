// What the memory-measuring examples (GraphScale, StreamMemory) share: the resident size and a way to
// hand freed memory back first.
import Foundation

#if canImport(Glibc)
    /// glibc's `malloc_trim`, which the Glibc module does not export.
    @_silgen_name("malloc_trim") func glibcMallocTrim(_ pad: Int) -> Int32

    /// Hands freed memory back to the system, so a resident size measures what is still allocated
    /// rather than what glibc's arenas keep for reuse.
    public func trimAllocator() { _ = glibcMallocTrim(0) }
#else
    /// Nothing to do outside glibc.
    public func trimAllocator() {}
#endif

/// Resident memory in MiB from /proc (Linux; 0 elsewhere): `VmRSS` now, or `VmHWM` for the peak.
public func residentMiB(_ field: String = "VmRSS") -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") })
    else { return 0 }
    let kilobytes = Double(line.split(separator: " ").dropFirst().first.map(String.init) ?? "0") ?? 0
    return kilobytes / 1024
}
