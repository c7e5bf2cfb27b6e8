import Foundation
import FuzzSupport
import RTMAuth

// Login tokens, as the server sees them: any string gives a verified token or a `TokenError`,
// never a trap (the zlib inflater of "007" included). The first byte chooses how the rest is
// presented: as the token text itself, or as the binary content of a "007" (zlib) or "006"
// token, base64-encoded here so the fuzzer reaches the unpackers instead of mutating base64.
let appId = "0123456789abcdef0123456789abcdef"
let certificate = "fedcba9876543210fedcba9876543210"

fuzzMain { bytes in
    guard let mode = bytes.first else { return }
    let rest = Data(bytes.dropFirst())
    let token: String
    switch mode % 3 {
    case 0: token = String(decoding: rest, as: UTF8.self)
    case 1: token = AccessToken2.version + rest.base64EncodedString()
    default: token = AccessToken006.version + appId + rest.base64EncodedString()
    }
    _ = try? AccessToken006.parse(token)
    _ = try? AccessToken2.parse(token)
    _ = try? RTMToken.verify(token, appId: appId, appCertificate: certificate, userId: "alice", now: 1_800_000_000)
}
