import Foundation
import StenoCore
import StenoSystem

// The one flag parser of every `steno` command. A command declares its flags once (name,
// value, help, default, environment variable); parsing, the fallback to `STENO_*`
// variables, the typed errors and the `--help` text all come from that declaration.
//
// Rules, the same for every command:
// - Flags take their value as `--port 9000` or `--port=9000`; a following flag is not a
//   value (`--port --host x` lacks the port), but an explicitly empty one is (`--model=`).
// - A non-repeatable flag given twice takes the last value; a repeatable one collects them.
// - A flag given on the command line wins over its environment variable. Variables are
//   trimmed, an empty one counts as unset, and a repeatable flag's variable is a
//   comma-separated list, ignored entirely when the flag is given at least once.
// - Switches (`--fast`) take no value.
// - `-h` or `--help` anywhere asks for the help text; nothing else is checked then.
// - `-` alone is an argument (standard input), not a flag.

/// One command-line option.
struct Flag: Hashable, Sendable {
    /// Without the dashes: `port` is `--port`.
    let name: String
    /// What the value is, in the help text (`N`, `PATH`); nil for a switch, which takes none.
    let valueName: String?
    /// One line for the help text.
    let help: String
    /// The default as the help text shows it; nil: none shown.
    let defaultText: String?
    /// The `STENO_*` variable read when the flag is not given; nil: none.
    let environment: String?
    /// Given several times, the values add up (`--token a --token b`).
    let repeatable: Bool

    init(_ name: String, value: String?, help: String, default defaultText: String? = nil,
         environment: String? = nil, repeatable: Bool = false) {
        self.name = name
        self.valueName = value
        self.help = help
        self.defaultText = defaultText
        self.environment = environment
        self.repeatable = repeatable
    }

    /// A flag that takes no value.
    static func toggle(_ name: String, help: String, environment: String? = nil) -> Flag {
        Flag(name, value: nil, help: help, environment: environment)
    }

    var flag: String { "--" + name }
    var isSwitch: Bool { valueName == nil }
}

/// A value as given, and where it came from (for error messages).
struct FlagValue: Equatable, Sendable {
    var text: String
    /// `--port`, or `STENO_PORT (environment)`.
    var source: String
}

/// Why a command line cannot be used; `description` is the message for the user.
struct UsageError: Error, Equatable, Sendable, CustomStringConvertible {
    enum Problem: Equatable, Sendable {
        /// A flag that does not exist, with the nearest real one when there is one.
        case unknownOption(String, suggestion: String?)
        /// A flag at the end, or followed by another flag.
        case missingValue(option: String)
        /// A switch given a value (`--fast=yes`).
        case unexpectedValue(option: String)
        /// An argument the command does not take.
        case unexpectedArgument(String)
        /// A required argument is missing (`FILE`).
        case missingArgument(String)
        /// A value that does not fit; `source` is the flag or the environment variable.
        case invalidValue(source: String, value: String, expected: String)
        /// `option` only makes sense with `other` (`--cert` needs `--key`).
        case requires(option: String, other: String, reason: String)
        /// Two options that cannot be used together.
        case conflict(String, String)
    }

    /// `steno serve`.
    var command: String
    var problem: Problem

    init(_ problem: Problem, command: String) {
        self.problem = problem
        self.command = command
    }

    var description: String {
        switch problem {
        case let .unknownOption(name, suggestion):
            let hint = suggestion.map { " (did you mean \($0)?)" } ?? ""
            return "unknown option \(name)\(hint); see \(command) --help"
        case let .missingValue(option):
            return "\(option) needs a value"
        case let .unexpectedValue(option):
            return "\(option) takes no value"
        case let .unexpectedArgument(argument):
            return "unexpected argument '\(argument)'; see \(command) --help"
        case let .missingArgument(name):
            return "\(name) is missing; see \(command) --help"
        case let .invalidValue(source, value, expected):
            return "invalid value '\(value)' for \(source): expected \(expected)"
        case let .requires(option, other, reason):
            return "\(option) needs \(other) as well: \(reason)"
        case let .conflict(a, b):
            return "\(a) and \(b) cannot be used together"
        }
    }
}

/// A command's flags and arguments: parses them, and writes its help text.
struct CommandSpec: Sendable {
    /// `steno serve`.
    let command: String
    /// The arguments after the options in the usage line, e.g. `FILE` or `[INPUT]`.
    let arguments: String
    /// Most arguments (not flags) taken.
    let maxArguments: Int
    /// Paragraphs under the usage line.
    let summary: String
    let flags: [Flag]
    /// Extra text after the flags (exit codes, examples).
    let epilogue: String

    init(command: String, arguments: String = "", maxArguments: Int = 0, summary: String,
         flags: [Flag], epilogue: String = "") {
        self.command = command
        self.arguments = arguments
        self.maxArguments = maxArguments
        self.summary = summary
        self.flags = flags
        self.epilogue = epilogue
    }

    func error(_ problem: UsageError.Problem) -> UsageError { UsageError(problem, command: command) }

    /// Parses `arguments` (what follows the command's name) with `environment` as the
    /// fallback for flags that have a variable (others are ignored).
    func parse(_ arguments: [String], environment: [String: String] = [:]) throws(UsageError) -> ParsedCommandLine {
        var parsed = ParsedCommandLine(spec: self, environment: environment)
        if arguments.contains(where: { $0 == "--help" || $0 == "-h" }) {
            parsed.helpRequested = true
            return parsed
        }
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("-"), argument != "-" else {
                guard parsed.arguments.count < maxArguments else { throw error(.unexpectedArgument(argument)) }
                parsed.arguments.append(argument)
                continue
            }
            let name: Substring
            var value: String?
            if let equals = argument.firstIndex(of: "=") {
                name = argument[..<equals]
                value = String(argument[argument.index(after: equals)...])
            } else {
                name = argument[...]
            }
            guard name.hasPrefix("--"), let flag = flags.first(where: { $0.name == name.dropFirst(2) }) else {
                throw error(.unknownOption(String(name), suggestion: suggestion(for: String(name))))
            }
            if flag.isSwitch {
                guard value == nil else { throw error(.unexpectedValue(option: flag.flag)) }
                parsed.given[flag.name, default: []].append("")
                continue
            }
            if value == nil {
                guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                    throw error(.missingValue(option: flag.flag))
                }
                value = arguments[index]
                index += 1
            }
            parsed.given[flag.name, default: []].append(value ?? "")
        }
        return parsed
    }

    /// The closest flag to a misspelt one, if it is close.
    func suggestion(for name: String) -> String? {
        let typed = Array(name.drop(while: { $0 == "-" }))
        if typed.count >= 2, "help".hasPrefix(String(typed)) { return "--help" }
        var best: (flag: Flag, distance: Int)?
        for flag in flags {
            let distance = Self.editDistance(typed, Array(flag.name))
            if distance <= 2, distance < best?.distance ?? Int.max { best = (flag, distance) }
        }
        return best?.flag.flag
    }

    /// Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        let width = b.count + 1
        var table = Array(repeating: 0, count: (a.count + 1) * width)
        for i in 0...a.count { table[i * width] = i }
        for j in 0...b.count { table[j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var best = min(table[(i - 1) * width + j] + 1, table[i * width + j - 1] + 1,
                               table[(i - 1) * width + j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    best = min(best, table[(i - 2) * width + j - 2] + 1)
                }
                table[i * width + j] = best
            }
        }
        return table[a.count * width + b.count]
    }

    // MARK: Help

    /// The `--help` text: usage, summary, every flag with its default and variable.
    func helpText() -> String {
        let usage = "Usage: \(command)" + (arguments.isEmpty ? "" : " " + arguments) + " [options]"
        var lines = [usage, ""]
        if !summary.isEmpty {
            lines.append(summary)
            lines.append("")
        }
        let column = 34
        func row(_ left: String, _ text: String) -> String {
            let left = "  " + left
            if left.count >= column { return left + "\n" + String(repeating: " ", count: column) + text }
            return left + String(repeating: " ", count: column - left.count) + text
        }
        for flag in flags {
            lines.append(row(flag.valueName.map { "\(flag.flag) \($0)" } ?? flag.flag, flag.help))
            var notes: [String] = []
            if let value = flag.defaultText { notes.append("default: \(value)") }
            if let variable = flag.environment { notes.append("env \(variable)") }
            if !notes.isEmpty { lines.append(row("", notes.joined(separator: "; "))) }
        }
        lines.append(row("-h, --help", "show this text"))
        var text = lines.joined(separator: "\n") + "\n"
        if !epilogue.isEmpty { text += "\n" + epilogue + (epilogue.hasSuffix("\n") ? "" : "\n") }
        return text
    }
}

/// What a command line gave: flag values, arguments, and the environment to fall back on.
struct ParsedCommandLine: Sendable {
    let spec: CommandSpec
    let environment: [String: String]
    /// Values by flag name, in the order given (switches: one empty value per use).
    fileprivate(set) var given: [String: [String]] = [:]
    /// The arguments that are not flags, in order.
    fileprivate(set) var arguments: [String] = []
    /// `-h` or `--help` was given: print the help text, nothing else was checked.
    fileprivate(set) var helpRequested = false

    fileprivate init(spec: CommandSpec, environment: [String: String]) {
        self.spec = spec
        self.environment = environment
    }

    func error(_ problem: UsageError.Problem) -> UsageError { spec.error(problem) }

    /// The flag's last value, else its variable's.
    func single(_ flag: Flag) -> FlagValue? {
        if let last = given[flag.name]?.last { return FlagValue(text: last, source: flag.flag) }
        if let text = environmentValue(flag) { return FlagValue(text: text, source: environmentSource(flag)) }
        return nil
    }

    /// All the flag's values, else its variable's comma-separated items.
    func list(_ flag: Flag) -> [FlagValue] {
        if let values = given[flag.name] { return values.map { FlagValue(text: $0, source: flag.flag) } }
        guard let text = environmentValue(flag) else { return [] }
        return text.split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
            .map { FlagValue(text: $0, source: environmentSource(flag)) }
    }

    /// Whether a switch is on: given, or its variable set to `1`, `true` or `yes`.
    func isOn(_ flag: Flag) -> Bool {
        if given[flag.name] != nil { return true }
        guard let text = environmentValue(flag)?.lowercased() else { return false }
        return ["1", "true", "yes"].contains(text)
    }

    /// Whether the flag was given on the command line (not through the environment).
    func wasGiven(_ flag: Flag) -> Bool { given[flag.name] != nil }

    private func environmentValue(_ flag: Flag) -> String? {
        guard let name = flag.environment, let raw = environment[name] else { return nil }
        let trimmed = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? nil : trimmed
    }

    private func environmentSource(_ flag: Flag) -> String { "\(flag.environment ?? "") (environment)" }

    // MARK: Typed values

    /// A whole number in `range`.
    func integer(_ value: FlagValue, in range: ClosedRange<Int>) throws(UsageError) -> Int {
        let expected = "a whole number from \(range.lowerBound) to \(range.upperBound)"
        let text = value.text
        if text.hasPrefix("-"), text.count > 1, text.dropFirst().allSatisfy(\.isASCIIDigit) {
            throw error(.invalidValue(source: value.source, value: text, expected: expected + " (not negative)"))
        }
        guard !text.isEmpty, text.allSatisfy(\.isASCIIDigit), let number = Int(text), range.contains(number) else {
            throw error(.invalidValue(source: value.source, value: text, expected: expected))
        }
        return number
    }

    /// Plain decimal seconds in `range`: `30`, `2.5`, `.5`. No sign, exponent or unit.
    func seconds(_ value: FlagValue, in range: ClosedRange<Double>) throws(UsageError) -> Double {
        try decimal(value, in: range, expected: "seconds from \(JSONWriter.secondsText(range.lowerBound)) to \(JSONWriter.secondsText(range.upperBound)), such as 30 or 2.5")
    }

    /// A plain decimal share from 0 to 1: `0.9`, `.85`, `1`.
    func fraction(_ value: FlagValue) throws(UsageError) -> Double {
        try decimal(value, in: 0...1, expected: "a fraction from 0 to 1, such as 0.9")
    }

    private func decimal(_ value: FlagValue, in range: ClosedRange<Double>, expected: String) throws(UsageError) -> Double {
        let text = value.text
        if text.hasPrefix("-") {
            let rest = text.dropFirst()
            if !rest.isEmpty, rest.allSatisfy({ $0.isASCIIDigit || $0 == "." }) {
                throw error(.invalidValue(source: value.source, value: text, expected: expected + " (not negative)"))
            }
        }
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let digitsOnly = parts.allSatisfy { $0.allSatisfy(\.isASCIIDigit) }
        let hasDigits = parts.contains { !$0.isEmpty }
        guard digitsOnly, hasDigits, let number = Double(text), number.isFinite, range.contains(number) else {
            throw error(.invalidValue(source: value.source, value: text, expected: expected))
        }
        return number
    }

    /// A non-empty path (whether it exists is for the command to find out).
    func path(_ value: FlagValue) throws(UsageError) -> String {
        guard !value.text.isEmpty else {
            throw error(.invalidValue(source: value.source, value: value.text, expected: "a path"))
        }
        return value.text
    }

    /// One of `choices`, compared as given.
    func choice(_ value: FlagValue, _ choices: [String]) throws(UsageError) -> String {
        guard choices.contains(value.text) else {
            throw error(.invalidValue(source: value.source, value: value.text,
                                      expected: "one of " + choices.joined(separator: ", ")))
        }
        return value.text
    }

    /// A host name or IP address.
    func host(_ value: FlagValue) throws(UsageError) -> String {
        guard !value.text.isEmpty, !value.text.contains(where: { $0.isWhitespace }) else {
            throw error(.invalidValue(source: value.source, value: value.text,
                                      expected: "a host name or IP address, such as 127.0.0.1 or 0.0.0.0"))
        }
        return value.text
    }

    /// A numeric IPv4 or IPv6 address (no name: the peer a connection comes from is an address).
    func ipAddress(_ value: FlagValue) throws(UsageError) -> String {
        var buffer = [UInt8](repeating: 0, count: 16)
        guard inet_pton(AF_INET, value.text, &buffer) == 1 || inet_pton(AF_INET6, value.text, &buffer) == 1 else {
            throw error(.invalidValue(source: value.source, value: value.text,
                                      expected: "an IP address, such as 10.0.0.2 or fd00::2"))
        }
        return value.text
    }

    /// A bearer token: visible ASCII except the comma (the separator of `STENO_TOKENS`).
    func token(_ value: FlagValue) throws(UsageError) -> String {
        let valid = !value.text.isEmpty && value.text.unicodeScalars.allSatisfy {
            $0.value >= 0x21 && $0.value <= 0x7E && $0 != ","
        }
        guard valid else {
            throw error(.invalidValue(source: value.source, value: value.text,
                                      expected: "a token of visible ASCII characters, without spaces or commas"))
        }
        return value.text
    }

    /// `scheme://host[:port]`, as browsers send it in `Origin`; lowercased.
    func origin(_ value: FlagValue) throws(UsageError) -> String {
        let origin = value.text.lowercased()
        let invalid = error(.invalidValue(
            source: value.source, value: value.text,
            expected: "an origin scheme://host[:port] without a path, such as https://example.com"))
        guard let separator = origin.range(of: "://") else { throw invalid }
        let scheme = origin[..<separator.lowerBound]
        let authority = origin[separator.upperBound...]
        guard let first = scheme.first, first.isLetter,
              scheme.allSatisfy({ $0.isLetter || $0.isASCIIDigit || "+-.".contains($0) }),
              !authority.isEmpty,
              !authority.contains(where: { "/?#@ ,".contains($0) || $0.isWhitespace })
        else { throw invalid }
        return origin
    }

    /// pocketsphinx options as on its command line, `-NAME VALUE` pairs separated by spaces
    /// (`-fwdflat yes -vad_postspeech 40`), added to Steno's defaults (one Steno sets takes the value
    /// given). The engine checks the rest (`-logfn`, `-samprate`, unknown names) when it
    /// loads the model.
    func decoderArguments(_ value: FlagValue) throws(UsageError) -> [String] {
        let words = value.text.split(whereSeparator: \.isWhitespace).map(String.init)
        let pairs = words.count.isMultiple(of: 2)
            && stride(from: 0, to: words.count, by: 2).allSatisfy { words[$0].count > 1 && words[$0].hasPrefix("-") }
        guard !words.isEmpty, pairs else {
            throw error(.invalidValue(source: value.source, value: value.text,
                                      expected: "pocketsphinx options as -NAME VALUE pairs, such as \"-fwdflat yes -vad_postspeech 40\""))
        }
        return words
    }

    /// A log level (`warn` is taken for `warning`), any case.
    func logLevel(_ value: FlagValue) throws(UsageError) -> LogLevel {
        let text = value.text.lowercased()
        if text == "warn" { return .warning }
        guard let level = LogLevel(rawValue: text) else {
            throw error(.invalidValue(source: value.source, value: value.text,
                                      expected: "one of " + LogLevel.allCases.map(\.rawValue).joined(separator: ", ")))
        }
        return level
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isWholeNumber }
}
