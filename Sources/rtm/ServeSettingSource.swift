/// Where the value of an `rtm serve` setting came from, as errors name it.
enum ServeSettingSource: Sendable, Equatable, CustomStringConvertible {
    /// The command line: `--port` (or `-p`).
    case flag(String)
    /// An environment variable: `RTM_PORT`.
    case variable(String)
    /// A configuration file and the key in it.
    case file(path: String, key: String)
    /// Nothing gave it: the declaration's default.
    case defaultValue

    var description: String {
        switch self {
        case .flag(let flag): "flag \(flag)"
        case .variable(let name): "variable \(name)"
        case .file(let path, let key): "file \(path):\(key)"
        case .defaultValue: "the default"
        }
    }
}
