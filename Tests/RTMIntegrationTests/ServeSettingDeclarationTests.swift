import Foundation
@testable import rtm
import Testing

/// `rtm serve`'s setting declarations as values: each is well formed, the reader applies the
/// precedence and the ranges to them, and docs/configuration.md lists every one with its range.
@Suite(.realTime)
struct ServeSettingDeclarationTests {
    @Test("Every declaration has a unique name, a help line unless hidden, and a default inside its own range")
    func declarationsAreWellFormed() {
        let names = ServeSetting.all.map(\.name)
        #expect(Set(names).count == names.count, "\(names)")
        for setting in ServeSetting.all {
            #expect(setting.hidden || !setting.help.isEmpty, "\(setting.name)")
            switch setting.kind {
            case .integer(let value?, let range): #expect(range.contains(value), "\(setting.name)")
            case .number(let value?, let range): #expect(range.contains(value), "\(setting.name)")
            case .choice(let value?, let among): #expect(among.contains(value), "\(setting.name)")
            default: break
            }
            #expect(!setting.secret || setting.defaultText == nil, "a secret with a default: \(setting.name)")
        }
    }

    @Test("The command line wins over the environment, which wins over the file; every layer's value is range-checked")
    func precedenceAndRanges() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-decl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("rtm.json").path
        try #"{"port": 1, "publish-rate": 5, "login-rate": 7, "namespace": ["a.*:private"], "store-full-sync": true}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let values = try ServeSettingsReader(arguments: ["-p", "2", "--config", file],
                                             environment: ["RTM_PORT": "3", "RTM_PUBLISH_RATE": "6", "RTM_NAMESPACE": "b.*:no-presence\nc.*:private"]).read()
        #expect(values.whole(.port) == 2)
        #expect(values.source(of: .port) == .flag("-p"))
        #expect(values.number(.publishRate) == 6)
        #expect(values.source(of: .publishRate) == .variable("RTM_PUBLISH_RATE"))
        #expect(values.number(.loginRate) == 7)
        #expect(values.source(of: .loginRate) == .file(path: file, key: "login-rate"))
        #expect(values.strings(.namespace) == ["b.*:no-presence", "c.*:private"])
        #expect(values.flag(.storeFullSync))
        #expect(values.number(.heartbeatSlack) == 10)
        #expect(values.source(of: .heartbeatSlack) == .defaultValue)
        // A value a higher layer hides is not read; one nothing hides is checked wherever it is.
        #expect(throws: ServeSettingError.invalid(.loginRate, from: .variable("RTM_LOGIN_RATE"), got: "-1", allowed: "0…1000000")) {
            try ServeSettingsReader(arguments: [], environment: ["RTM_LOGIN_RATE": "-1"]).read()
        }
        #expect(throws: ServeSettingError.invalid(.port, from: .flag("--port"), got: "nothing", allowed: "a whole number in 0…65535")) {
            try ServeSettingsReader(arguments: ["--port"], environment: [:]).read()
        }
        let secret = ServeSettingError.invalid(.adminKey, from: .flag("--admin-key"), got: "key-4711", allowed: "a string").description
        #expect(secret == "invalid setting admin-key from flag --admin-key: got a secret value, allowed a string")
    }

    @Test("docs/configuration.md lists every setting with its variable, default and range, exactly as declared")
    func documentListsEverySetting() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let document = try String(contentsOf: root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        #expect(document.contains(ServeSetting.markdownTable), "docs/configuration.md's table of rtm serve settings should be:\n\(ServeSetting.markdownTable)")
    }
}
