import RTMServer

/// `rtm admin` could not get an answer from the admin API: the address, and why in our words;
/// for a certificate problem, which one and what to do about it.
struct AdminConnectionError: Error, CustomStringConvertible {
    let target: WebhookHTTPClient.Target
    let error: WebhookDeliveryError
    let trust: AdminTrust

    var description: String {
        let at = "\(target.host):\(target.port)"
        switch error.tls {
        case .untrusted?:
            return "the admin API's certificate at \(at) is not trusted: it does not chain to a CA in \(trust.source) "
                + "(or is outside its validity dates); give the CA that signed it with --ca-file PATH (or SSL_CERT_FILE)"
        case .wrongName?:
            return "the admin API's certificate at \(at) does not name \(target.host): use an admin URL with a name or address it lists"
        case .notTLS?:
            return "the admin API at \(at) does not speak TLS: use an http:// admin URL"
        case nil:
            return "cannot reach the admin API at \(at): \(error.reason)"
        }
    }
}
