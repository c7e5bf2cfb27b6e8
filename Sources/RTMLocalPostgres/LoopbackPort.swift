import Foundation

/// Loopback ports for tests that start a process on a port chosen in advance (a server that
/// must come back on the same port, a database).
public enum LoopbackPort {
    /// The first of `count` consecutive ports nobody uses right now, below the range the
    /// kernel hands out to outgoing connections (32768 and up on Linux), so that no client
    /// socket takes one of them before the process started on them binds it (the kernel's
    /// choice of `free()` is an ephemeral port: the ports after it are not reserved).
    public static func freeRange(_ count: Int) throws -> Int {
        let low = 20_000, high = 32_000 - count
        for _ in 0..<200 {
            let base = Int.random(in: low...high)
            if (base..<(base + count)).allSatisfy(isFree) { return base }
        }
        throw LoopbackPortError()
    }

    /// Whether a listener could bind `port` on 127.0.0.1 now.
    private static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// A port nobody listens on right now, below the kernel's range for outgoing connections
    /// (`freeRange(1)`): a port the kernel picked (bind to port 0) is an ephemeral one, and a
    /// client socket of a test running beside may take it before the process meant for it
    /// binds it.
    public static func free() throws -> Int {
        try freeRange(1)
    }
}

/// No loopback port could be bound.
public struct LoopbackPortError: Error, CustomStringConvertible {
    public var description: String { "could not bind a free port on 127.0.0.1" }
}
