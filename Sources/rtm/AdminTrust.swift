import NIOSSL

/// The CA certificates `rtm admin` trusts for an https:// admin URL: `--ca-file`, else the
/// file `SSL_CERT_FILE` names, else the system trust store; and how errors name them.
struct AdminTrust {
    let roots: NIOSSLTrustRoots
    /// `--ca-file PATH`, `SSL_CERT_FILE PATH` or `the system trust store`.
    let source: String

    /// Loads the file, if one is named; one that holds no readable certificate is an error naming it.
    init(caFile: String?, environment: [String: String]) throws(AdminTrustError) {
        let named: (option: String, path: String)?
        if let caFile {
            named = ("--ca-file", caFile)
        } else if let path = environment["SSL_CERT_FILE"], !path.isEmpty {
            named = ("SSL_CERT_FILE", path)
        } else {
            named = nil
        }
        guard let named else {
            roots = .default
            source = "the system trust store"
            return
        }
        let certificates = (try? NIOSSLCertificate.fromPEMFile(named.path)) ?? []
        guard !certificates.isEmpty else { throw AdminTrustError(option: named.option, path: named.path) }
        roots = .certificates(certificates)
        source = "\(named.option) \(named.path)"
    }
}

/// A CA file `rtm admin` cannot use.
struct AdminTrustError: Error, CustomStringConvertible {
    let option: String
    let path: String
    var description: String { "\(option) \(path) is not a readable PEM file of CA certificates" }
}
