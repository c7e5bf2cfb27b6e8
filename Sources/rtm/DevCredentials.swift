import Foundation
import RTMServer

/// The development app id and certificate kept in the data directory (`app.json`), created on
/// the first `rtm serve` so the quick start needs no set-up.
struct DevCredentials: Codable {
    var appId: String
    var appCertificate: String

    static func path(in dataDir: String) -> String { (dataDir as NSString).appendingPathComponent("app.json") }

    static func load(dataDir: String) -> DevCredentials? {
        guard let data = FileManager.default.contents(atPath: path(in: dataDir)) else { return nil }
        return try? JSONDecoder().decode(DevCredentials.self, from: data)
    }

    /// Loads, or creates and stores new random credentials.
    static func loadOrCreate(dataDir: String) throws -> (DevCredentials, created: Bool) {
        if let existing = load(dataDir: dataDir) { return (existing, false) }
        try DataDirectory.prepare(dataDir)
        let credentials = DevCredentials(appId: randomHex(32), appCertificate: randomHex(32))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(credentials).write(to: URL(fileURLWithPath: path(in: dataDir)))
        try? FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path(in: dataDir))
        return (credentials, true)
    }

    static func randomHex(_ count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in "0123456789abcdef".randomElement(using: &generator)! })
    }
}
