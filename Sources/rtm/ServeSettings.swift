import ArgumentParser
import Foundation

/// `rtm serve`'s options from a configuration file and environment variables, as well as from
/// its command line: every option `rtm serve --help` lists. The command line wins, then the
/// environment (`RTM_PUBLISH_RATE=30` for `--publish-rate 30`), then the file (`--config
/// FILE` or `RTM_CONFIG`: a JSON object, `{"publish-rate": 30, "namespace": ["private.*:private"]}`).
///
/// Both become command-line options before the command is parsed, so they are validated by
/// the same parser, with the same errors, as typed ones. A key the file does not know is an
/// error naming it; environment variables that name no option are left alone (the environment
/// holds other programs' variables too).
enum ServeSettings {
    /// An option of `rtm serve`: its long name and what it takes.
    struct Known: Equatable {
        enum Kind: Equatable { case flag, value, values }
        let name: String
        let kind: Kind
    }

    /// Every option of `rtm serve` and its option groups, read from the commands' declarations.
    static let known: [Known] = {
        let groups: [any ParsableArguments] = [Serve(), ServeStoreOptions(), ServeAuthHookOptions()]
        return groups.flatMap { group in
            Mirror(reflecting: group).children.compactMap { child -> Known? in
                guard let label = child.label, label.hasPrefix("_") else { return nil }
                let type = String(describing: Swift.type(of: child.value))
                let kind: Known.Kind
                if type.hasPrefix("Flag<") {
                    kind = .flag
                } else if type.hasPrefix("Option<Array<") {
                    kind = .values
                } else if type.hasPrefix("Option<") {
                    kind = .value
                } else {
                    return nil   // option groups: read on their own
                }
                return Known(name: kebab(String(label.dropFirst())), kind: kind)
            }
        }
    }()

    /// `publishRate` → `publish-rate` (ArgumentParser's default long names).
    static func kebab(_ name: String) -> String {
        var out = ""
        for character in name {
            if character.isUppercase {
                out += "-" + character.lowercased()
            } else {
                out.append(character)
            }
        }
        return out
    }

    /// The environment variable of an option: `RTM_` and its name in capitals, `-` as `_`.
    static func variable(_ name: String) -> String {
        "RTM_" + name.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// `arguments` (after `serve`) with the options the command line does not give added from
    /// the environment and the configuration file.
    static func expand(_ arguments: [String], environment: [String: String]) throws -> [String] {
        let given = Set(arguments.compactMap { argument -> String? in
            guard argument.hasPrefix("--") else { return argument == "-p" ? "port" : nil }
            return String(argument.dropFirst(2).prefix { $0 != "=" })
        })
        var added: [String] = []
        var fromEnvironment = Set<String>()
        for option in known where !given.contains(option.name) && option.name != "config" {
            guard let value = environment[variable(option.name)] else { continue }
            fromEnvironment.insert(option.name)
            added += try commandLine(option, values: option.kind == .values ? value.split(separator: "\n").map(String.init) : [value],
                                        source: "environment variable \(variable(option.name))")
        }
        guard let path = configPath(arguments) ?? environment["RTM_CONFIG"] else { return arguments + added }
        for (key, value) in try readFile(path) {
            guard let option = known.first(where: { $0.name == key }), key != "config" else {
                throw ValidationError("configuration file \(path): unknown option '\(key)' (the keys are rtm serve's option names, as in --help, without the dashes)")
            }
            guard !given.contains(key), !fromEnvironment.contains(key) else { continue }
            added += try commandLine(option, values: try values(value, option: option, path: path), source: "configuration file \(path)")
        }
        return arguments + added
    }

    /// The value of `--config` on the command line.
    private static func configPath(_ arguments: [String]) -> String? {
        for (index, argument) in arguments.enumerated() {
            if argument == "--config", index + 1 < arguments.count { return arguments[index + 1] }
            if argument.hasPrefix("--config=") { return String(argument.dropFirst("--config=".count)) }
        }
        return nil
    }

    /// A value of the file, as JSON has it (a flag must be a boolean, not `1` or `"yes"`).
    enum FileValue: Decodable {
        case bool(Bool)
        case text(String)
        case list([FileValue])
        case other

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let bool = try? container.decode(Bool.self) {
                self = .bool(bool)
            } else if let int = try? container.decode(Int.self) {
                self = .text(String(int))
            } else if let double = try? container.decode(Double.self) {
                self = .text(String(double))
            } else if let string = try? container.decode(String.self) {
                self = .text(string)
            } else if let list = try? container.decode([FileValue].self) {
                self = .list(list)
            } else {
                self = .other
            }
        }
    }

    private static func readFile(_ path: String) throws -> [(String, FileValue)] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("configuration file \(path) cannot be read (does it exist, and may this user read it?)")
        }
        guard let options = try? JSONDecoder().decode([String: FileValue].self, from: data) else {
            throw ValidationError("configuration file \(path) is not a JSON object of rtm serve options ({\"port\": 9600, …})")
        }
        return options.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// A file value as the option's command-line values.
    private static func values(_ value: FileValue, option: Known, path: String) throws -> [String] {
        func text(_ item: FileValue) throws -> String {
            guard case .text(let text) = item else { throw ValidationError("configuration file \(path): '\(option.name)' takes a string or a number") }
            return text
        }
        switch (option.kind, value) {
        case (.flag, .bool(let on)): return [on ? "true" : "false"]
        case (.flag, _): throw ValidationError("configuration file \(path): '\(option.name)' is a flag: true or false")
        case (.values, .list(let items)): return try items.map(text)
        case (.value, .list): throw ValidationError("configuration file \(path): '\(option.name)' takes one value, not a list")
        default: return [try text(value)]
        }
    }

    /// Command-line arguments for an option's values.
    private static func commandLine(_ option: Known, values: [String], source: String) throws -> [String] {
        switch option.kind {
        case .flag:
            switch values.first?.lowercased() {
            case "1", "true", "yes": return ["--\(option.name)"]
            case "0", "false", "no", "": return []
            default: throw ValidationError("\(source): '\(option.name)' is a flag: true or false, got '\(values.first ?? "")'")
            }
        case .value, .values:
            return values.flatMap { ["--\(option.name)", $0] }
        }
    }
}
