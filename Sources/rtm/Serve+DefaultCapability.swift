import ArgumentParser
import Foundation
import RTMAuth

extension Serve {
    /// `--default-capability`'s grants (nil: none given), read as a capability token's `rtm`
    /// claim; a bad one is named.
    static func defaultCapabilities(_ text: String?) throws -> Capabilities? {
        guard let text else { return nil }
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) else {
            throw ValidationError("--default-capability: not JSON; give the grants as a capability token's rtm claim, e.g. '{\"channels\":{\"lobby\":[\"subscribe\"]}}'")
        }
        do throws(TokenError) {
            return try CapabilityToken.grants(fromJSON: object)
        } catch {
            throw ValidationError("--default-capability: \(error.reason)")
        }
    }
}
