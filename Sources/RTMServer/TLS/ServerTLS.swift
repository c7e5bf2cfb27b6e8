import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL

/// The server's TLS context, replaceable while the server runs (`rtm serve --tls-cert
/// --tls-key`; reloaded on SIGHUP by `CertificateReloader`).
///
/// Every new connection takes the context current at its accept, so a reload changes the
/// certificate for new connections only; connections already open keep the session they
/// negotiated. A reload that fails (missing file, bad PEM, key not matching the certificate)
/// throws and leaves the current context in place.
final class ServerTLS: Sendable {
    /// The certificate chain and key files, PEM.
    let certificatePath: String
    let keyPath: String
    private let context: NIOLockedValueBox<NIOSSLContext>

    /// Loads the files; throws `TLSFilesError` naming the file that could not be used.
    init(certificatePath: String, keyPath: String) throws {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        self.context = NIOLockedValueBox(try Self.load(certificatePath: certificatePath, keyPath: keyPath))
    }

    /// A context from both files, or nil when neither is given; `names` are the settings'
    /// names, for the error when only one is.
    convenience init?(certificatePath: String?, keyPath: String?, names: (certificate: String, key: String)) throws {
        switch (certificatePath, keyPath) {
        case (nil, nil): return nil
        case (let certificate?, let key?): try self.init(certificatePath: certificate, keyPath: key)
        default: throw TLSFilesError(file: certificatePath ?? keyPath ?? "",
                                     problem: "TLS needs both a certificate (\(names.certificate)) and a key (\(names.key))")
        }
    }

    /// The context new connections use.
    var current: NIOSSLContext { context.withLockedValue { $0 } }

    /// Reads the files again and swaps the context in; on failure the old one stays.
    func reload() throws {
        let fresh = try Self.load(certificatePath: certificatePath, keyPath: keyPath)
        context.withLockedValue { $0 = fresh }
    }

    private static func load(certificatePath: String, keyPath: String) throws -> NIOSSLContext {
        let chain: [NIOSSLCertificate]
        do { chain = try NIOSSLCertificate.fromPEMFile(certificatePath) } catch {
            throw TLSFilesError(file: certificatePath, problem: "not a readable PEM certificate chain (\(error))")
        }
        guard !chain.isEmpty else { throw TLSFilesError(file: certificatePath, problem: "no certificate in the file") }
        let key: NIOSSLPrivateKey
        do { key = try NIOSSLPrivateKey(file: keyPath, format: .pem) } catch {
            throw TLSFilesError(file: keyPath, problem: "not a readable PEM private key (\(error))")
        }
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        do { return try NIOSSLContext(configuration: configuration) } catch {
            throw TLSFilesError(file: keyPath, problem: "the key does not fit the certificate in \(certificatePath) (\(error))")
        }
    }
}

/// A TLS certificate or key file that could not be used.
public struct TLSFilesError: Error, CustomStringConvertible, Sendable {
    /// The file concerned.
    public let file: String
    /// What is wrong with it.
    public let problem: String

    /// `TLS file '…': …`.
    public var description: String { "TLS file '\(file)': \(problem)" }
}

/// Answers a client that speaks plain HTTP to the TLS port with a plain-text `400` saying so,
/// instead of leaving it to guess at a TLS alert: the first byte of a TLS connection is a
/// handshake record (22); anything else is not TLS. Removes itself after the first read.
final class PlainTextOnTLSPortHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    /// The body sent to a plain-HTTP client on the client port.
    static let body = body(scheme: "wss")
    /// The whole response; the SDK recognises the `X-RTM-Error` header (`tls-required`).
    static let response = response(scheme: "wss")
    /// The admin listener's (`https://`).
    static let adminResponse = response(scheme: "https")

    private let reply: String

    /// `reply`: `response` on the client port, `adminResponse` on the admin listener.
    init(reply: String = PlainTextOnTLSPortHandler.response) { self.reply = reply }

    static func body(scheme: String) -> String { "this port requires TLS: connect with \(scheme)://\n" }

    static func response(scheme: String) -> String {
        let body = body(scheme: scheme)
        return "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nX-RTM-Error: tls-required\r\n"
            + "Connection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return }
        if first == 22 {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            return
        }
        let reply = context.channel.allocator.buffer(string: self.reply)
        context.writeAndFlush(wrapOutboundOut(reply)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}

@available(*, unavailable)
extension PlainTextOnTLSPortHandler: Sendable {}
