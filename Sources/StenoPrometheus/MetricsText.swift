// The Prometheus text exposition format, 0.0.4: how a header, a sample and a number are
// written, how label values and help are escaped, which names are valid (`MetricsText`),
// and the check tests use on the lines a registry prints (`MetricsExposition`).

/// The pieces of the text format.
enum MetricsText {
    static func header(name: String, help: String, kind: MetricKind, into text: inout String) {
        text += "# HELP \(name) \(escapeHelp(help))\n"
        text += "# TYPE \(name) \(kind.rawValue)\n"
    }

    static func sample(_ name: String, labels: [(String, String)], value: Double, into text: inout String) {
        text += name
        if !labels.isEmpty {
            text += "{"
            text += labels.map { "\($0.0)=\"\(escapeLabelValue($0.1))\"" }.joined(separator: ",")
            text += "}"
        }
        text += " \(number(value))\n"
    }

    /// A sample value or `le` bound: integers without a fraction, `+Inf`, `-Inf`, `NaN`,
    /// otherwise Swift's shortest round-tripping form (`0.25`, `1e-05`).
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value == .infinity { return "+Inf" }
        if value == -.infinity { return "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    /// In label values: backslash, double quote and line feed are escaped.
    static func escapeLabelValue(_ value: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(value.utf8.count)
        for character in value.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// In `# HELP` text: backslash and line feed are escaped.
    static func escapeHelp(_ help: String) -> String {
        var escaped = ""
        for character in help.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    static func isValidMetricName(_ name: String) -> Bool {
        isName(name, allowColon: true)
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved).
    static func isValidLabelName(_ name: String) -> Bool {
        isName(name, allowColon: false) && !name.hasPrefix("__")
    }

    private static func isName(_ name: String, allowColon: Bool) -> Bool {
        guard let first = name.utf8.first else { return false }
        func isLetter(_ c: UInt8) -> Bool { (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 95 || (allowColon && c == 58) }
        func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
        return isLetter(first) && name.utf8.allSatisfy { isLetter($0) || isDigit($0) }
    }
}

/// Checks on the text format, for tests of what a registry exposes.
public enum MetricsExposition {
    /// Whether `line` is a sample line as the 0.0.4 text format allows it:
    /// `name{label="value",…} number` (for tests of what a registry prints).
    public static func isSampleLine(_ line: Substring) -> Bool {
        guard let space = line.lastIndex(of: " ") else { return false }
        let series = line[..<space]
        let value = line[line.index(after: space)...]
        guard ["+Inf", "-Inf", "NaN"].contains(value) || Double(value) != nil else { return false }
        guard let brace = series.firstIndex(of: "{") else {
            return MetricsText.isValidMetricName(String(series))
        }
        guard series.last == "}", MetricsText.isValidMetricName(String(series[..<brace])) else { return false }
        // Walk label="value" pairs, honouring escapes inside values.
        var rest = series[series.index(after: brace)..<series.index(before: series.endIndex)]
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "="), MetricsText.isValidLabelName(String(rest[..<equals])) else {
                return false
            }
            rest = rest[rest.index(after: equals)...]
            guard rest.first == "\"" else { return false }
            rest = rest.dropFirst()
            var closed = false
            while let character = rest.first {
                rest = rest.dropFirst()
                if character == "\\" {
                    guard let escaped = rest.first, ["\\", "\"", "n"].contains(escaped) else { return false }
                    rest = rest.dropFirst()
                } else if character == "\"" {
                    closed = true
                    break
                } else if character == "\n" {
                    return false
                }
            }
            guard closed else { return false }
            if rest.first == "," { rest = rest.dropFirst() } else if !rest.isEmpty { return false }
        }
        return true
    }
}
