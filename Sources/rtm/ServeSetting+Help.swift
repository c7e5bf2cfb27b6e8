import Foundation

/// `rtm serve --help`'s list of settings, made from their declarations.
extension ServeSetting {
    /// Every setting not hidden: its flag, variable, kind and range, default and help, in lines
    /// of at most 78 characters (the help screen keeps lines that fit).
    static var helpText: String {
        let settings = all.filter { !$0.hidden }.map { setting in
            var head = setting.flag
            if let short = setting.short { head += ", -\(short)" }
            if setting.kind != .flag { head += " <\(setting.allowed)>" }
            var facts = ["variable \(setting.variable)"]
            if !setting.inFile { facts.append("not in the file") }
            if let fallback = setting.defaultText, !setting.secret { facts.append("default \(fallback)") }
            if setting.secret { facts.append("secret") }
            return (wrap("\(head) (\(facts.joined(separator: "; ")))", indent: "  ", then: "      ")
                    + wrap(setting.help, indent: "      ", then: "      ")).joined(separator: "\n")
        }
        let intro = wrap("SETTINGS: each from its flag, its variable, or its key in the configuration file, in that order; "
                         + "every value is checked against its range wherever it comes from.", indent: "", then: "")
        return ([""] + intro + settings).joined(separator: "\n")
    }

    /// Every setting not hidden as the rows of docs/configuration.md's table (a test keeps the
    /// document equal to it): name, variable, default, allowed values, help.
    static var markdownTable: String {
        let rows = all.filter { !$0.hidden }.map { setting in
            let fallback = setting.secret ? "none (secret)" : setting.defaultText.map { "`\($0)`" } ?? "none"
            let cells = ["`\(setting.name)`" + (setting.short.map { ", `-\($0)`" } ?? ""), "`\(setting.variable)`", fallback,
                         setting.allowed + (setting.inFile ? "" : " (not in the file)"), setting.help]
            return "| " + cells.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |"
        }
        return (["| setting (flag `--NAME`, file key) | variable | default | allowed | what it does |", "|---|---|---|---|---|"] + rows)
            .joined(separator: "\n")
    }

    /// `text` in lines of at most 78 characters: the first starting with `indent`, the others with `then`.
    private static func wrap(_ text: String, indent: String, then: String) -> [String] {
        var lines: [String] = []
        var line = indent
        for word in text.split(whereSeparator: \.isWhitespace) {
            if line.count + word.count + 1 > 78, line.contains(where: { !$0.isWhitespace }) {
                lines.append(line)
                line = then
            }
            line += (line.last == " " || line.isEmpty ? "" : " ") + word
        }
        lines.append(line)
        return lines
    }
}
