/// `rtm serve` settings that cannot be used, in one form: the setting, where its value came
/// from (flag, variable or file:key), what it got and what is allowed. A secret's value is
/// never part of it.
///
/// ```
/// invalid setting port from file /etc/rtm.json:port: got 70000, allowed 0…65535
/// ```
struct ServeSettingError: Error, CustomStringConvertible, Equatable {
    private enum Problem: Equatable {
        case invalid(setting: String, source: ServeSettingSource, got: String, allowed: String)
        case unknownFlag(String)
        case unknownKey(String, path: String)
        case file(path: String, reason: String)
        case together([String], reason: String)
    }

    private let problem: Problem

    /// A value out of its range or of the wrong kind.
    static func invalid(_ setting: ServeSetting, from source: ServeSettingSource, got: String, allowed: String) -> Self {
        Self(problem: .invalid(setting: setting.name, source: source, got: setting.secret ? "a secret value" : got, allowed: allowed))
    }

    /// A command-line option that no setting has.
    static func unknownFlag(_ flag: String) -> Self { Self(problem: .unknownFlag(flag)) }

    /// A configuration file's key that no setting has.
    static func unknownKey(_ key: String, path: String) -> Self { Self(problem: .unknownKey(key, path: path)) }

    /// A configuration file that cannot be read or is not a mapping of settings.
    static func file(_ path: String, _ reason: String) -> Self { Self(problem: .file(path: path, reason: reason)) }

    /// Settings that only work together, or not at all together: `tls-cert and tls-key go together`.
    static func together(_ settings: [ServeSetting], _ reason: String) -> Self {
        Self(problem: .together(settings.map(\.flag), reason: reason))
    }

    var description: String {
        switch problem {
        case .invalid(let setting, let source, let got, let allowed):
            "invalid setting \(setting) from \(source): got \(got), allowed \(allowed)"
        case .unknownFlag(let flag):
            "unknown setting \(flag) (rtm serve --help lists the settings)"
        case .unknownKey(let key, let path):
            "unknown setting \(key) in file \(path) (its keys are rtm serve's settings, as rtm serve --help lists them, without the dashes)"
        case .file(let path, let reason):
            "configuration file \(path) \(reason)"
        case .together(let flags, let reason):
            flags.joined(separator: " and ") + " " + reason
        }
    }
}
