import ArgumentParser
import Foundation
import RTMAuth

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Mint an RTM login token (AccessToken \"006\" or \"007\", compatible with the reference token builders), or a capability token.",
        discussion: """
            With --capability or --user-capability, mints a capability token instead: a JWT (HS256, signed with the \
            app certificate) that limits what the user's session may do. Pass it with the login token \
            (`rtm sub --capability TOKEN`, `RTMClient.login(token:capability:)`).
              rtm token --user alice --capability 'room.*=subscribe,publish,presence' --user-capability '*=send'
            Channel operations: subscribe, publish, presence, metadata.read, metadata.write, lock, history, \
            stream.join, stream.publish. User operations: send, status, invite, metadata.read, metadata.write. \
            '*' grants every operation.
            """)

    @Option(help: "User id the token is for.") var user: String
    @Option(help: "Seconds until the token expires (0 = never). Default: 86400 (a day) for a login token, 3600 (an hour) for a capability token: grants are short-lived, renewed by the app's backend (renewToken) as it decides.")
    var expire: UInt32?
    @Option(help: "App id (default: the data directory's development app).") var appId: String?
    @Option(help: "App certificate (default: the data directory's development app).") var appCertificate: String?
    @Option(help: "Data directory holding the development app.") var dataDir = "rtm-data"
    @Option(help: "Token version: 006 or 007 (AccessToken2).") var version = "006"
    @Option(name: .customLong("capability"), help: "Mint a capability token granting PATTERN=OP,OP on channels (repeatable; e.g. 'room.*=subscribe,publish').")
    var channelGrants: [String] = []
    @Option(name: .customLong("user-capability"), help: "In a capability token, grant PATTERN=OP,OP on other users (repeatable; e.g. '*=send,status').")
    var userGrants: [String] = []

    func run() throws {
        let (appId, certificate) = try Credentials.resolve(appId: appId, appCertificate: appCertificate, dataDir: dataDir)
        guard let certificate else { throw ValidationError("no app certificate: give --app-certificate") }
        let now = UInt32(Date().timeIntervalSince1970)
        if !channelGrants.isEmpty || !userGrants.isEmpty {
            let expire = self.expire ?? 3600
            print(CapabilityToken.mint(try capabilities(), appId: appId, userId: user, appCertificate: certificate,
                                       issuedAt: now, expiresAt: expire == 0 ? nil : now + expire))
            return
        }
        let expire = self.expire ?? 24 * 3600
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

extension TokenCommand {
    /// The grants of --capability and --user-capability.
    func capabilities() throws -> Capabilities {
        var channels: [String: Set<Capabilities.ChannelOperation>] = [:]
        var users: [String: Set<Capabilities.UserOperation>] = [:]
        do throws(TokenError) {
            for text in channelGrants {
                let grant = try Capabilities.parseGrant(text, as: Capabilities.ChannelOperation.self)
                channels[grant.pattern, default: []].formUnion(grant.operations)
            }
            for text in userGrants {
                let grant = try Capabilities.parseGrant(text, as: Capabilities.UserOperation.self)
                users[grant.pattern, default: []].formUnion(grant.operations)
            }
        } catch {
            throw ValidationError(error.reason)
        }
        return Capabilities(channels: channels, users: users)
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
