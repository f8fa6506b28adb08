import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// This process as a store's owner sees it, and the liveness of another process on this host (a pid
/// that exists, started at the time its owner row recorded: a reused pid does not count).
enum ProcessIdentity {
    /// This process's id.
    static var pid: Int32 { getpid() }

    /// This host's name, from `gethostname` (`ProcessInfo.hostName` may look the name up in DNS, which
    /// can take seconds without a network).
    static let host: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }()

    /// When process `pid` started, as a number that is the same for every read of one process and
    /// differs for a later process given the same pid; nil if there is no such process (or the
    /// platform cannot tell). Linux: `/proc/<pid>/stat` field 22 (clock ticks after boot); Darwin:
    /// `sysctl(KERN_PROC_PID)`'s start time.
    static func startTime(of pid: Int32) -> Double? {
        #if os(Linux) || os(Android)
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            // Fields after the command name (which may hold spaces): state is field 3; start time 22.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 19, let ticks = Double(fields[19]) else { return nil }
            return ticks
        #elseif canImport(Darwin)
            var info = kinfo_proc()
            var size = MemoryLayout<kinfo_proc>.stride
            var name: [Int32] = [CTL_KERN, KERN_PROC, KERN_PROC_PID, pid]
            guard sysctl(&name, 4, &info, &size, nil, 0) == 0, size > 0 else { return nil }
            let start = info.kp_proc.p_starttime
            return Double(start.tv_sec) + Double(start.tv_usec) / 1e6
        #else
            return nil
        #endif
    }

    /// Whether the process that recorded (`pid`, `startTime`) on this host is still running.
    static func isAlive(pid: Int32, startTime: Double?) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let startTime, let now = Self.startTime(of: pid) else { return true }
        return now == startTime
    }
}
