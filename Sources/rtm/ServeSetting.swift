/// One setting of `rtm serve`, declared once: its name, the kind of value it takes with its
/// default and allowed range, its help line, and whether it is a secret.
///
/// The name is the flag (`--publish-rate`), the key in a configuration file (`publish-rate`)
/// and, in capitals with `_` for `-` after `RTM_`, the environment variable
/// (`RTM_PUBLISH_RATE`). Every value is checked against the kind's range wherever it comes from
/// (`ServeSettingsReader`); a secret's value is never printed, in errors or anywhere else.
///
/// ```swift
/// static let publishRate = ServeSetting("publish-rate", .number(default: 60, range: 0...1_000_000),
///                                       help: "Publishes per second per client (0 = unlimited).")
/// ```
struct ServeSetting: Sendable, Hashable {
    /// What a setting takes, with its default and what is allowed.
    enum Kind: Sendable, Hashable {
        /// true or false; false unless given. On the command line the flag alone means true.
        case flag
        /// A whole number in `range`; without a default, unset unless given.
        case integer(default: Int?, range: ClosedRange<Int>)
        /// A number in `range`; without a default, unset unless given.
        case number(default: Double?, range: ClosedRange<Double>)
        /// A string; `shape` says what it must look like (checked where the setting is used).
        case text(default: String?, shape: String)
        /// Any number of strings: the flag repeated, one a line in the variable, a list in a file.
        case texts(shape: String)
        /// One of `among`.
        case choice(default: String?, among: [String])
    }

    /// The flag without its dashes, the file's key.
    let name: String
    let kind: Kind
    /// One line (or a few) for `rtm serve --help` and docs/configuration.md.
    let help: String
    /// Never printed: not in errors, log lines, `--help` defaults nor the admin API.
    var secret = false
    /// Left out of `--help` (settings that tests use).
    var hidden = false
    /// A one-letter flag as well (`-p`).
    var short: Character?
    /// Whether a configuration file may hold it (`config` names the file itself).
    var inFile = true

    init(_ name: String, _ kind: Kind, help: String, secret: Bool = false, hidden: Bool = false, short: Character? = nil, inFile: Bool = true) {
        self.name = name
        self.kind = kind
        self.help = help
        self.secret = secret
        self.hidden = hidden
        self.short = short
        self.inFile = inFile
    }

    /// `--publish-rate`.
    var flag: String { "--" + name }

    /// `RTM_PUBLISH_RATE`.
    var variable: String { "RTM_" + name.uppercased().replacingOccurrences(of: "-", with: "_") }

    /// What a value must be, as errors and `--help` say it: `0…65535`, `one of info, debug`, ….
    var allowed: String {
        switch kind {
        case .flag: "true or false"
        case .integer(_, let range): "\(range.lowerBound)…\(range.upperBound)"
        case .number(_, let range): "\(Self.format(range.lowerBound))…\(Self.format(range.upperBound))"
        case .text(_, let shape), .texts(let shape): shape
        case .choice(_, let among): "one of " + among.joined(separator: ", ")
        }
    }

    /// What a value of the wrong kind should have been: `a number in 0…1000000`.
    var expected: String {
        switch kind {
        case .integer: "a whole number in \(allowed)"
        case .number: "a number in \(allowed)"
        case .texts: "a list of strings (\(allowed))"
        case .flag, .text, .choice: allowed
        }
    }

    /// The default as `--help` shows it, nil when there is none.
    var defaultText: String? {
        switch kind {
        case .flag: "false"
        case .integer(let value?, _): String(value)
        case .number(let value?, _): Self.format(value)
        case .text(let value?, _), .choice(let value?, _): value
        case .integer(nil, _), .number(nil, _), .text(nil, _), .choice(nil, _), .texts: nil
        }
    }

    /// A number as people write it: `1000000`, `0.5`, `-1` (never `1e+06` or `-1.0`).
    static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    static func == (lhs: ServeSetting, rhs: ServeSetting) -> Bool { lhs.name == rhs.name }
    func hash(into hasher: inout Hasher) { hasher.combine(name) }
}
