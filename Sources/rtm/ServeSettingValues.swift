/// The values of `rtm serve`'s settings once read from the command line, the environment and
/// the configuration file (`ServeSettingsReader`), each already checked against its declared
/// range and kept with where it came from; settings that nothing gave have their defaults.
struct ServeSettingValues: Sendable {
    /// A value as its setting's kind has it.
    enum Value: Sendable, Equatable {
        case bool(Bool)
        case int(Int)
        case double(Double)
        case string(String)
        case strings([String])
    }

    private var values: [String: (value: Value, source: ServeSettingSource)] = [:]

    /// Sets `setting`'s value, from `source`, checked against its range first.
    mutating func set(_ setting: ServeSetting, to value: Value, from source: ServeSettingSource) throws(ServeSettingError) {
        switch (setting.kind, value) {
        case (.flag, .bool), (.text, .string), (.texts, .strings):
            break
        case (.integer(_, let range), .int(let number)):
            guard range.contains(number) else { throw .invalid(setting, from: source, got: String(number), allowed: setting.allowed) }
        case (.number(_, let range), .double(let number)):
            guard range.contains(number) else {
                throw .invalid(setting, from: source, got: ServeSetting.format(number), allowed: setting.allowed)
            }
        case (.choice(_, let among), .string(let text)):
            guard among.contains(text) else { throw .invalid(setting, from: source, got: Self.quoted(text), allowed: setting.allowed) }
        default:
            preconditionFailure("\(setting.name): a \(value) for a \(setting.kind) setting")
        }
        values[setting.name] = (value, source)
    }

    /// Where `setting`'s value came from.
    func source(of setting: ServeSetting) -> ServeSettingSource {
        values[setting.name]?.source ?? .defaultValue
    }

    /// Whether anything gave `setting` a value (its default does not count).
    func isGiven(_ setting: ServeSetting) -> Bool { values[setting.name] != nil }

    /// The error for `setting`'s value when where it is used finds it unusable (a namespace
    /// that does not parse, an address that is not host:port): the same form as a range error.
    func invalid(_ setting: ServeSetting, got: String? = nil, allowed: String? = nil) -> ServeSettingError {
        let shown: String
        switch values[setting.name]?.value {
        case _ where got != nil: shown = Self.quoted(got ?? "")
        case .string(let text)?: shown = Self.quoted(text)
        case .int(let number)?: shown = String(number)
        case .double(let number)?: shown = ServeSetting.format(number)
        case .bool(let on)?: shown = String(on)
        case .strings(let texts)?: shown = texts.map(Self.quoted).joined(separator: ", ")
        case nil: shown = "nothing"
        }
        return .invalid(setting, from: source(of: setting), got: shown, allowed: allowed ?? setting.allowed)
    }

    /// A flag's value.
    func flag(_ setting: ServeSetting) -> Bool {
        guard case .bool(let on)? = values[setting.name]?.value else { return false }
        return on
    }

    /// A whole number's value, or its default (nil when it has none).
    func int(_ setting: ServeSetting) -> Int? {
        if case .int(let number)? = values[setting.name]?.value { return number }
        guard case .integer(let fallback, _) = setting.kind else { preconditionFailure("\(setting.name) is not a whole number") }
        return fallback
    }

    /// A number's value, or its default (nil when it has none).
    func double(_ setting: ServeSetting) -> Double? {
        if case .double(let number)? = values[setting.name]?.value { return number }
        guard case .number(let fallback, _) = setting.kind else { preconditionFailure("\(setting.name) is not a number") }
        return fallback
    }

    /// A string's or a choice's value, or its default (nil when it has none).
    func string(_ setting: ServeSetting) -> String? {
        if case .string(let text)? = values[setting.name]?.value { return text }
        switch setting.kind {
        case .text(let fallback, _), .choice(let fallback, _): return fallback
        default: preconditionFailure("\(setting.name) is not a string")
        }
    }

    /// A list's values (none unless given).
    func strings(_ setting: ServeSetting) -> [String] {
        guard case .strings(let texts)? = values[setting.name]?.value else { return [] }
        return texts
    }

    /// The value of a whole number with a default.
    func whole(_ setting: ServeSetting) -> Int { Self.defaulted(int(setting), setting) }

    /// The value of a number with a default.
    func number(_ setting: ServeSetting) -> Double { Self.defaulted(double(setting), setting) }

    /// The value of a string or a choice with a default.
    func text(_ setting: ServeSetting) -> String { Self.defaulted(string(setting), setting) }

    private static func defaulted<Value>(_ value: Value?, _ setting: ServeSetting) -> Value {
        guard let value else { preconditionFailure("\(setting.name) has no default") }
        return value
    }

    static func quoted(_ text: String) -> String { "\"\(text)\"" }
}
