import Foundation
import StenoCore

/// `--phrases FILE` of `steno transcribe` and `steno send`: one phrase per line (names,
/// terms), blank lines and lines starting with `#` skipped, checked by the rules of `start`'s
/// "phrases" (`Vocabulary`) so that a bad file is refused before any audio is read.
enum PhraseFile {
    static let help = "words and phrases to expect, one per line (at most \(Vocabulary.maxPhrases) of at most \(Vocabulary.maxWordsPerPhrase) words; # comments)"
    static let boostHelp = "how strongly the phrases are favoured, \(Vocabulary.boostRange.lowerBound)-\(Int(Vocabulary.boostRange.upperBound)); more finds more and risks false alarms"

    /// `--boost`'s value (it needs `--phrases`).
    static func boost(_ given: ParsedCommandLine, _ flag: Flag, phrases: Flag) throws(UsageError) -> Double? {
        guard let value = given.single(flag) else { return nil }
        guard given.single(phrases) != nil else {
            throw given.error(.requires(option: flag.flag, other: phrases.flag, reason: "it scales the phrases"))
        }
        let expected = "a number from \(Vocabulary.boostRange.lowerBound) to \(Int(Vocabulary.boostRange.upperBound)), such as 2 or 0.5"
        guard value.text.allSatisfy({ $0.isNumber || $0 == "." }), let number = Double(value.text), number.isFinite,
              Vocabulary.boostRange.contains(number) else {
            throw given.error(.invalidValue(source: value.source, value: value.text, expected: expected))
        }
        return number
    }

    static func read(_ path: String) -> Result<[String], StenoError> {
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(StenoError(.badMessage, "cannot read the file"))
        }
        let phrases = parse(String(decoding: data, as: UTF8.self))
        do throws(StenoError) {
            _ = try Vocabulary(phrases: phrases, field: "phrases")
        } catch {
            return .failure(error)
        }
        return .success(phrases)
    }

    /// The phrases of a file's text.
    static func parse(_ text: String) -> [String] {
        text.split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }
}
