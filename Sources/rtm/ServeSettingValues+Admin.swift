import Foundation
import RTMServer

/// `rtm serve`'s admin API settings (`ServeSetting.admin`): its key turns the listener on.
extension ServeSettingValues {
    func applyAdmin(to config: inout ServerConfiguration) throws(ServeSettingError) {
        guard let key = string(.adminKey), !key.isEmpty else { return }
        let listen = text(.adminListen)
        guard let (host, port) = Self.hostPort(listen, ports: 0...65535) else { throw invalid(.adminListen) }
        guard isGiven(.adminTlsCert) == isGiven(.adminTlsKey) else { throw .together([.adminTlsCert, .adminTlsKey], "go together") }
        config.adminKey = key
        config.adminHost = host
        config.adminPort = port
        config.adminTLSCertificatePath = string(.adminTlsCert)
        config.adminTLSKeyPath = string(.adminTlsKey)
    }

    /// `host:port` (`[::1]:9601` too) with a port in `ports`.
    static func hostPort(_ text: String, ports: ClosedRange<Int>) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), colon != text.startIndex, let port = Int(text[text.index(after: colon)...]),
              ports.contains(port) else { return nil }
        return (String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port)
    }
}
