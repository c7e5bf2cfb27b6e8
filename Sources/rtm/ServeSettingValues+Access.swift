import Foundation
import RTMAuth

/// `rtm serve`'s default capability (`ServeSetting.defaultCapability`): what a session whose
/// login brought no capability token may do, read as a capability token's `rtm` claim.
extension ServeSettingValues {
    /// The grants (nil when none is given); JSON that is not a claim is refused in the settings'
    /// error form, with what is wrong with it (`SIGHUP` reloads it).
    func defaultCapabilities() throws(ServeSettingError) -> Capabilities? {
        guard let text = string(.defaultCapability) else { return nil }
        let example = #"e.g. '{"channels":{"lobby":["subscribe"]}}'"#
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) else {
            throw invalid(.defaultCapability, allowed: "\(ServeSetting.defaultCapability.allowed) (this is not JSON), \(example)")
        }
        do throws(TokenError) {
            return try CapabilityToken.grants(fromJSON: object)
        } catch {
            throw invalid(.defaultCapability, allowed: "\(ServeSetting.defaultCapability.allowed) (\(error.reason))")
        }
    }
}
