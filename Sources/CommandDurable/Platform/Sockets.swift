import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The inspector's TCP sockets, IPv4, blocking, each used on one thread of the inspector's own (never a
/// thread of the Dispatch or concurrency pools): what differs between Linux and Darwin is here.
enum Sockets {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Whether `host` is this machine's loopback (`127.x.x.x`, `localhost`, `::1`).
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// A socket listening on `host:port` (port 0: one the system picks), and the port it got.
    static func listen(host: String, port: Int) throws -> (socket: Int32, port: Int) {
        #if canImport(Darwin)
            let fd = socket(AF_INET, SOCK_STREAM, 0)
        #else
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let name = host == "localhost" ? "127.0.0.1" : host == "::1" ? "127.0.0.1" : host
        guard inet_pton(AF_INET, name, &address.sin_addr) == 1 else {
            close(fd)
            throw Failure(description: "'\(host)' is not an IPv4 address (give 127.0.0.1, 0.0.0.0 or an address)")
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Foundation.listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "cannot listen on \(host):\(port): \(reason)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: actual.sin_port)))
    }

    /// The next connection (blocks this thread); nil once the listening socket was shut.
    static func accept(_ listener: Int32) -> Int32? {
        while true {
            let fd = Foundation.accept(listener, nil, nil)
            if fd >= 0 {
                #if canImport(Darwin)
                    var noSignal: Int32 = 1
                    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &noSignal, socklen_t(MemoryLayout<Int32>.size))
                #endif
                return fd
            }
            if errno == EINTR || errno == ECONNABORTED { continue }
            return nil
        }
    }

    /// Up to `limit` bytes (blocks this thread, up to `timeout` seconds); empty at the peer's end, nil on
    /// an error or the timeout.
    static func read(_ fd: Int32, limit: Int = 16_384, timeout: Int = 30) -> [UInt8]? {
        var time = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: limit)
        while true {
            let count = recv(fd, &buffer, limit, 0)
            if count >= 0 { return Array(buffer.prefix(count)) }
            if errno == EINTR { continue }
            return nil
        }
    }

    /// Writes all of `bytes` (blocks this thread, up to 10 s per write); false once the peer is gone.
    static func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var time = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        #if canImport(Darwin)
            let flags: Int32 = 0
        #else
            let flags = Int32(MSG_NOSIGNAL)
        #endif
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, flags) }
            if sent > 0 {
                offset += sent
            } else if sent < 0 && errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }

    /// Stops a listening socket's `accept` (and a connection's reads and writes), then closes it.
    static func shut(_ fd: Int32) {
        #if canImport(Darwin)
            shutdown(fd, SHUT_RDWR)
        #else
            shutdown(fd, Int32(SHUT_RDWR))
        #endif
        close(fd)
    }
}
