/// The version of this package: the server reports it (`RTMServer.version`, the admin API's
/// `info`, `rtm_build_info`), and the SDK sends it in its upgrade request's `User-Agent`
/// (`swift-rtm/VERSION`), which the admin API shows per session.
public enum RTMVersion {
    /// The version, `MAJOR.MINOR.PATCH`.
    public static let current = "0.14.0"
    /// The SDK's `User-Agent`.
    public static let userAgent = "swift-rtm/\(current)"
}
