import Configuration
import Foundation
import Yams

/// `rtm serve`'s configuration file: JSON, or YAML when its name ends in `.yaml` or `.yml`; a
/// mapping whose keys are settings' names. Read once per start and once per `SIGHUP`; its
/// values come through swift-configuration's `JSONSnapshot` / `YAMLSnapshot`, and a key that
/// names no setting is refused (a misspelt key would otherwise be ignored without a word).
@available(macOS 15, iOS 18, *)
struct ServeSettingsFile: Sendable {
    /// The path as given.
    let path: String
    /// The file's values, typed on request.
    let snapshot: any ConfigSnapshot
    /// Each key's value as the file writes it, for errors about a value of the wrong kind.
    let written: [String: String]

    /// Reads and checks the file at `path`.
    static func read(_ path: String, settings: [ServeSetting] = ServeSetting.all) throws(ServeSettingError) -> ServeSettingsFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .file(path, "cannot be read (does it exist, and may this user read it?)")
        }
        let yaml = path.hasSuffix(".yaml") || path.hasSuffix(".yml")
        let written = try yaml ? Self.yamlKeys(data, path: path) : Self.jsonKeys(data, path: path)
        for key in written.keys.sorted() where !settings.contains(where: { $0.name == key && $0.inFile }) {
            throw .unknownKey(key, path: path)
        }
        let secrets = Set(settings.filter(\.secret).map(\.name))
        let snapshot: any ConfigSnapshot
        do {
            if yaml {
                snapshot = try YAMLSnapshot(data: data.bytes, providerName: path,
                                            parsingOptions: .init(secretsSpecifier: .dynamic { key, _ in secrets.contains(key) }))
            } else {
                snapshot = try JSONSnapshot(data: data.bytes, providerName: path,
                                            parsingOptions: .init(secretsSpecifier: .dynamic { key, _ in secrets.contains(key) }))
            }
        } catch {
            throw .file(path, "holds a value that is neither a string, a number, true or false, nor a list of them")
        }
        return ServeSettingsFile(path: path, snapshot: snapshot, written: written)
    }

    /// The top-level keys of a JSON object and their values as written.
    private static func jsonKeys(_ data: Data, path: String) throws(ServeSettingError) -> [String: String] {
        guard let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) as? [String: Any] else {
            throw .file(path, "is not a JSON object of rtm serve settings ({\"port\": 9600, …})")
        }
        return object.mapValues { value in
            if let text = value as? String { return ServeSettingValues.quoted(text) }
            if let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]) {
                return String(decoding: data, as: UTF8.self)
            }
            return String(describing: value)
        }
    }

    /// The top-level keys of a YAML mapping and their values as written.
    private static func yamlKeys(_ data: Data, path: String) throws(ServeSettingError) -> [String: String] {
        let root: Node?
        do { root = try Yams.compose(yaml: String(decoding: data, as: UTF8.self)) } catch {
            throw .file(path, "is not YAML: \(error)")
        }
        guard let mapping = root?.mapping else {
            throw .file(path, "is not a YAML mapping of rtm serve settings (port: 9600, …)")
        }
        var keys: [String: String] = [:]
        for (key, value) in mapping {
            guard let name = key.string else { throw .file(path, "has a key that is not a string") }
            if let scalar = value.scalar {
                keys[name] = Double(scalar.string) == nil && Bool(scalar.string) == nil ? ServeSettingValues.quoted(scalar.string) : scalar.string
            } else {
                keys[name] = (try? Yams.serialize(node: value).trimmingCharacters(in: .whitespacesAndNewlines)) ?? "a list or mapping"
            }
        }
        return keys
    }
}
