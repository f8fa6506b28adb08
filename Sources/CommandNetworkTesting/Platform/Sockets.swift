import Foundation

// The testing module's one platform layer: POSIX sockets from Glibc, Musl or Darwin, behind the few
// calls the loopback server makes.
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#else
    #error("AwesomeCommand needs Glibc, Musl or Darwin (a POSIX C library) for its locks and threads")
#endif

enum Sockets {
    /// A TCP socket bound to 127.0.0.1 on a port the system picks, listening or not: (descriptor, port).
    static func bindToLoopback(listening: Bool) throws -> (Int32, Int) {
        let fd = socket(AF_INET, streamType, 0)
        guard fd >= 0 else { throw LoopbackHTTPServer.StartError(call: "socket", code: errno) }
        var yes: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        #if canImport(Darwin)
            address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, !listening || listen(fd, 128) == 0 else {
            let code = errno
            _ = Glue.close(fd)
            throw LoopbackHTTPServer.StartError(call: listening ? "bind/listen" : "bind", code: code)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// The next connection, with SIGPIPE off; nil when `accept` failed (see ``interrupted``).
    static func accept(_ listener: Int32) -> Int32? {
        let connection = Glue.accept(listener)
        guard connection >= 0 else { return nil }
        #if canImport(Darwin)
            var yes: Int32 = 1
            _ = setsockopt(connection, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
        #endif
        return connection
    }

    /// Whether the last failed call was interrupted by a signal (worth retrying).
    static var interrupted: Bool { errno == EINTR }

    /// Appends what arrives (up to 64 KiB) to `buffer`; false when the connection closed or failed.
    static func receive(from connection: Int32, into buffer: inout Data) -> Bool {
        let capacity = 64 * 1024
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1)
        defer { chunk.deallocate() }
        let count = recv(connection, chunk, capacity, 0)
        guard count > 0 else { return false }
        buffer.append(chunk.assumingMemoryBound(to: UInt8.self), count: count)
        return true
    }

    /// Sends all of `data`; false when the connection closed or failed (never a SIGPIPE).
    static func send(_ data: Data, to connection: Int32) -> Bool {
        data.withUnsafeBytes { bytes -> Bool in
            var offset = 0
            while offset < bytes.count {
                let sent = Glue.send(connection, bytes.baseAddress! + offset, bytes.count - offset)
                if sent <= 0 { return false }
                offset += sent
            }
            return true
        }
    }

    /// Returns when the peer closed the connection or it was shut down.
    static func waitUntilClosed(_ connection: Int32) {
        var byte: UInt8 = 0
        while recv(connection, &byte, 1, 0) > 0 {}
    }

    static func shutdown(_ fd: Int32) { _ = Glue.shutdown(fd) }

    static func close(_ fd: Int32) { _ = Glue.close(fd) }

    static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }

    #if canImport(Darwin)
        private static let streamType = SOCK_STREAM
    #else
        private static let streamType = Int32(SOCK_STREAM.rawValue)
    #endif
}

/// The C library's functions whose names a member of `Sockets` shadows.
private enum Glue {
    static func accept(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
            Glibc.accept(fd, nil, nil)
        #elseif canImport(Musl)
            Musl.accept(fd, nil, nil)
        #else
            Darwin.accept(fd, nil, nil)
        #endif
    }

    static func send(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
            Glibc.send(fd, bytes, count, Int32(MSG_NOSIGNAL))
        #elseif canImport(Musl)
            Musl.send(fd, bytes, count, Int32(MSG_NOSIGNAL))
        #else
            Darwin.send(fd, bytes, count, 0)
        #endif
    }

    static func shutdown(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
            Glibc.shutdown(fd, Int32(SHUT_RDWR))
        #elseif canImport(Musl)
            Musl.shutdown(fd, Int32(SHUT_RDWR))
        #else
            Darwin.shutdown(fd, SHUT_RDWR)
        #endif
    }

    static func close(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
            Glibc.close(fd)
        #elseif canImport(Musl)
            Musl.close(fd)
        #else
            Darwin.close(fd)
        #endif
    }
}
