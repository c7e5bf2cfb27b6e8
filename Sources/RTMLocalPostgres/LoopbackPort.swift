import Foundation

/// Loopback ports for tests that start a process on a port chosen in advance (a server that
/// must come back on the same port, a database).
public enum LoopbackPort {
    /// A port nobody listens on right now (bound on 127.0.0.1, read, released).
    public static func free() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LoopbackPortError() }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw LoopbackPortError() }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// No loopback port could be bound.
public struct LoopbackPortError: Error, CustomStringConvertible {
    public var description: String { "could not bind a free port on 127.0.0.1" }
}
