import Configuration

/// `rtm serve`'s command line as a configuration provider, the first the settings reader asks.
///
/// Each argument is `--NAME VALUE`, `--NAME=VALUE`, `-p VALUE` or, for a flag, `--NAME` alone
/// (or `--NAME=false`). A value is the next argument whatever it looks like, so
/// `--heartbeat-slack -1` gives -1 to be refused by its range, not a missing value. A list
/// setting takes the flag once per value; any other setting given twice keeps the last. The
/// values are typed here by their declarations (the command line has only strings); an unknown
/// option or a value of the wrong kind is refused in the settings' one error form.
@available(macOS 15, iOS 18, *)
enum ServeCommandLine {
    /// The settings `arguments` give, typed, with the flag that gave each.
    static func parse(_ arguments: [String], settings: [ServeSetting] = ServeSetting.all) throws(ServeSettingError)
        -> [ServeSetting: (value: ConfigContent, flag: String)] {
        var texts: [ServeSetting: (values: [String], flag: String)] = [:]
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            let name: Substring
            var inline: String?
            if argument.hasPrefix("--") {
                let body = argument.dropFirst(2)
                name = body.prefix { $0 != "=" }
                if body.count > name.count { inline = String(body.dropFirst(name.count + 1)) }
            } else if argument.count == 2, argument.hasPrefix("-"), let short = argument.last,
                      let setting = settings.first(where: { $0.short == short }) {
                name = Substring(setting.name)
            } else {
                throw .unknownFlag(argument)
            }
            guard let setting = settings.first(where: { $0.name == name }) else { throw .unknownFlag(argument.prefix { $0 != "=" }.description) }
            let flag = argument.prefix { $0 != "=" }.description
            let value: String
            if let inline {
                value = inline
            } else if case .flag = setting.kind {
                value = "true"
            } else if index < arguments.endIndex {
                value = arguments[index]
                index += 1
            } else {
                throw .invalid(setting, from: .flag(flag), got: "nothing", allowed: setting.expected)
            }
            if case .texts = setting.kind {
                texts[setting, default: ([], flag)].values.append(value)
            } else {
                texts[setting] = ([value], flag)
            }
        }
        var typed: [ServeSetting: (value: ConfigContent, flag: String)] = [:]
        for (setting, given) in texts {
            typed[setting] = (try content(given.values, for: setting, flag: given.flag), given.flag)
        }
        return typed
    }

    /// A provider of the settings `arguments` give (the reader names each value's flag itself).
    static func provider(_ parsed: [ServeSetting: (value: ConfigContent, flag: String)]) -> InMemoryProvider {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        for (setting, given) in parsed {
            values[AbsoluteConfigKey([setting.name])] = ConfigValue(given.value, isSecret: setting.secret)
        }
        return InMemoryProvider(name: "command line", values: values)
    }

    /// The command line's strings as the setting's kind of value.
    private static func content(_ texts: [String], for setting: ServeSetting, flag: String) throws(ServeSettingError) -> ConfigContent {
        let text = texts.last ?? ""
        func wrongKind() -> ServeSettingError {
            .invalid(setting, from: .flag(flag), got: ServeSettingValues.quoted(text), allowed: setting.expected)
        }
        switch setting.kind {
        case .flag:
            guard let on = Bool(text.lowercased()) else { throw wrongKind() }
            return .bool(on)
        case .integer:
            guard let number = Int(text) else { throw wrongKind() }
            return .int(number)
        case .number:
            guard let number = Double(text) else { throw wrongKind() }
            return .double(number)
        case .text, .choice:
            return .string(text)
        case .texts:
            return .stringArray(texts)
        }
    }
}
