import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOSSL
import RTMProtocol

/// TLS for `wss://` endpoints: one context per client (trust roots are loaded once), a
/// handler per connection. The server certificate is verified against the system trust store,
/// or against `RTMClientConfig.caFile` when set, and its name against the endpoint's host (an
/// IP address is checked against the certificate's IP entries).
struct ClientTLS: Sendable, Equatable {
    let context: NIOSSLContext

    /// Loads the trust roots; a CA file that cannot be read is a configuration error.
    init(caFile: String?) throws(RTMError) {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            do {
                let certificates = try NIOSSLCertificate.fromPEMFile(caFile)
                guard !certificates.isEmpty else { throw TLSFileEmpty() }
                configuration.trustRoots = .certificates(certificates)
            } catch {
                throw RTMError(.invalidParameter, operation: "config", "caFile '\(caFile)' is not a readable PEM file of CA certificates (\(error))")
            }
        }
        do { context = try NIOSSLContext(configuration: configuration) } catch {
            throw RTMError(.invalidParameter, operation: "config", "cannot set up TLS: \(error)")
        }
    }

    /// The handler for one connection to `host`.
    func handler(host: String) throws -> NIOSSLClientHandler {
        // SNI carries names only; for an IP address NIOSSL checks the peer address instead.
        let isAddress = (try? SocketAddress(ipAddress: host, port: 0)) != nil
        return try NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : host)
    }

    static func == (lhs: ClientTLS, rhs: ClientTLS) -> Bool { lhs.context === rhs.context }

    private struct TLSFileEmpty: Error, CustomStringConvertible {
        var description: String { "no certificate in the file" }
    }
}

/// Why a connection attempt failed, when it failed for a reason retrying cannot fix: the
/// server's certificate is not trusted, the server does not speak TLS, or the port needs TLS
/// and the client spoke plain HTTP. Sits behind the HTTP client handlers until the upgrade;
/// it records the problem (`ConnectionProblem`) and closes the connection.
final class UpgradeProblemHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    static let name = "rtm.upgradeProblem"
    private let problem: ConnectionProblem
    private let secure: Bool

    init(problem: ConnectionProblem, secure: Bool) {
        self.problem = problem
        self.secure = secure
    }

    /// A response that reaches here did not upgrade (the upgrade handler passes it on).
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        if head.headers.first(name: "X-RTM-Error") == "tls-required" {
            problem.record(RTMError(.tlsRequired, operation: "login", "the server's port requires TLS: use a wss:// endpoint"))
        } else {
            problem.record(RTMError(.loginRejected, operation: "login",
                                    "the server answered \(head.status.code) \(head.status.reasonPhrase) instead of upgrading to WebSocket"))
        }
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOSSLError {
            problem.record(RTMError(.tlsHandshakeFailed, operation: "login", "TLS handshake failed: \(Self.describe(error))"))
        } else if let error = error as? NIOSSLExtraError {
            problem.record(RTMError(.tlsHandshakeFailed, operation: "login", "TLS handshake failed: \(error)"))
        } else if error is HTTPParserError, !secure {
            problem.record(RTMError(.tlsRequired, operation: "login",
                                    "the server did not answer in HTTP (a TLS port?): use a wss:// endpoint"))
        }
        context.fireErrorCaught(error)
    }

    private static func describe(_ error: NIOSSLError) -> String {
        let text = "\(error)"
        if text.contains("CERTIFICATE_VERIFY_FAILED") { return "the server's certificate is not trusted (\(text)); set caFile to its CA" }
        if text.contains("WRONG_VERSION_NUMBER") { return "the server does not speak TLS (\(text)); use a ws:// endpoint" }
        return text
    }
}

@available(*, unavailable)
extension UpgradeProblemHandler: Sendable {}

/// The first unrecoverable problem seen on one connection attempt (see `UpgradeProblemHandler`).
final class ConnectionProblem: Sendable {
    private let value = NIOLockedValueBox<RTMError?>(nil)

    func record(_ error: RTMError) { value.withLockedValue { if $0 == nil { $0 = error } } }

    var error: RTMError? { value.withLockedValue { $0 } }
}
