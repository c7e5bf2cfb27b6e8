import ArgumentParser
import Foundation
import RTMAuth

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Mint an RTM login token (AccessToken \"006\" or \"007\", compatible with the reference token builders).")

    @Option(help: "User id the token is for.") var user: String
    @Option(help: "Seconds until the login privilege expires (0 = never).") var expire: UInt32 = 24 * 3600
    @Option(help: "App id (default: the data directory's development app).") var appId: String?
    @Option(help: "App certificate (default: the data directory's development app).") var appCertificate: String?
    @Option(help: "Data directory holding the development app.") var dataDir = "rtm-data"
    @Option(help: "Token version: 006 or 007 (AccessToken2).") var version = "006"

    func run() throws {
        let (appId, certificate) = try Credentials.resolve(appId: appId, appCertificate: appCertificate, dataDir: dataDir)
        guard let certificate else { throw ValidationError("no app certificate: give --app-certificate") }
        let now = UInt32(Date().timeIntervalSince1970)
        switch version {
        case "006": break
        case "007":
            print(AccessToken2.buildRTMToken(appId: appId, appCertificate: certificate, userId: user, expire: expire == 0 ? 24 * 3600 : expire))
            return
        default: throw ValidationError("--version must be 006 or 007")
        }
        print(AccessToken006.buildRTMToken(
            appId: appId, appCertificate: certificate, userId: user,
            privilegeExpireTimestamp: expire == 0 ? 0 : now + expire))
    }
}

enum Credentials {
    /// App id and certificate from the options, else from the development app in `dataDir`.
    static func resolve(appId: String?, appCertificate: String?, dataDir: String) throws -> (String, String?) {
        if let appId { return (appId, appCertificate) }
        guard let dev = DevCredentials.load(dataDir: dataDir) else {
            throw ValidationError("no --app-id given and no development app in \(DevCredentials.path(in: dataDir)); run `rtm serve` first or pass --app-id")
        }
        return (dev.appId, appCertificate ?? dev.appCertificate)
    }
}
