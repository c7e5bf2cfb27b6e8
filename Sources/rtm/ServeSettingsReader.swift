import Configuration

/// Reads `rtm serve`'s settings through swift-configuration: the command line
/// (`ServeCommandLine`), then the environment (`EnvironmentVariablesProvider`, `RTM_NAME`;
/// a list one value a line), then the configuration file (`config` / `RTM_CONFIG`, JSON or
/// YAML, `ServeSettingsFile`). For each declared setting the first of them that has it gives
/// its value; the value is typed by that provider and checked against the setting's range, and
/// any failure names the setting and the flag, variable or file:key it came from.
///
/// ```swift
/// let values = try ServeSettingsReader(arguments: ["--port", "0"], environment: ProcessInfo.processInfo.environment).read()
/// let port = values.whole(.port)
/// ```
@available(macOS 15, iOS 18, *)
struct ServeSettingsReader: Sendable {
    /// One place values come from, in order of precedence.
    private struct Layer: Sendable {
        let snapshot: any ConfigSnapshot
        /// The key a setting has in this layer.
        let key: @Sendable (ServeSetting) -> AbsoluteConfigKey
        /// Where a setting's value in this layer comes from, as errors name it.
        let source: @Sendable (ServeSetting) -> ServeSettingSource
        /// A setting's value as written, for errors about a value of the wrong kind.
        let written: @Sendable (ServeSetting) -> String?
    }

    private let layers: [Layer]
    private let settings: [ServeSetting]

    /// Reads the command line and the environment, and the configuration file they name (the
    /// file is read now: `SIGHUP` makes a new reader).
    init(arguments: [String], environment: [String: String], settings: [ServeSetting] = ServeSetting.all) throws(ServeSettingError) {
        self.settings = settings
        let parsed = try ServeCommandLine.parse(arguments, settings: settings)
        let flags = parsed.mapValues(\.flag)
        let commandLine = Layer(snapshot: ServeCommandLine.provider(parsed).snapshot(), key: { AbsoluteConfigKey([$0.name]) },
                                source: { .flag(flags[$0] ?? $0.flag) }, written: { _ in nil })
        let secretVariables = Set(settings.filter(\.secret).map(\.variable))
        let environmentProvider = EnvironmentVariablesProvider(environmentVariables: environment,
                                                               secretsSpecifier: .specific(secretVariables), arraySeparator: "\n")
        let variables = Layer(snapshot: environmentProvider.snapshot(), key: { AbsoluteConfigKey(["rtm", $0.name]) },
                              source: { .variable($0.variable) }, written: { environment[$0.variable].map(ServeSettingValues.quoted) })
        var layers = [commandLine, variables]
        let path: String?
        if case .string(let given)? = parsed[.config]?.value {
            path = given
        } else {
            path = environment[ServeSetting.config.variable]
        }
        if let path {
            let file = try ServeSettingsFile.read(path, settings: settings)
            layers.append(Layer(snapshot: file.snapshot, key: { AbsoluteConfigKey([$0.name]) },
                                source: { .file(path: path, key: $0.name) }, written: { file.written[$0.name] }))
        }
        self.layers = layers
    }

    /// Every setting's value, checked.
    func read() throws(ServeSettingError) -> ServeSettingValues {
        var values = ServeSettingValues()
        for setting in settings {
            for layer in layers {
                let found: ConfigValue?
                do {
                    found = try layer.snapshot.value(forKey: layer.key(setting), type: Self.type(of: setting)).value
                } catch {
                    throw .invalid(setting, from: layer.source(setting), got: layer.written(setting) ?? "a value of another kind",
                                   allowed: setting.expected)
                }
                guard let found else { continue }
                try values.set(setting, to: Self.value(found.content), from: layer.source(setting))
                break
            }
        }
        return values
    }

    private static func type(of setting: ServeSetting) -> ConfigType {
        switch setting.kind {
        case .flag: .bool
        case .integer: .int
        case .number: .double
        case .text, .choice: .string
        case .texts: .stringArray
        }
    }

    private static func value(_ content: ConfigContent) -> ServeSettingValues.Value {
        switch content {
        case .bool(let on): .bool(on)
        case .int(let number): .int(number)
        case .double(let number): .double(number)
        case .string(let text): .string(text)
        case .stringArray(let texts): .strings(texts)
        case .bytes, .intArray, .doubleArray, .boolArray, .byteChunkArray:
            preconditionFailure("a \(content) for a setting (only the types of ServeSetting.Kind are asked for)")
        }
    }
}
