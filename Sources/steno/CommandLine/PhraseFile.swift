import Foundation
import StenoCore

/// `--phrases FILE` of `steno transcribe` and `steno send`: one phrase per line (names,
/// terms), blank lines and lines starting with `#` skipped, checked by the rules of `start`'s
/// "phrases" (`Vocabulary`) so that a bad file is refused before any audio is read.
enum PhraseFile {
    static let help = "words and phrases to expect, one per line (at most \(Vocabulary.maxPhrases) of at most \(Vocabulary.maxWordsPerPhrase) words; # comments)"

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
