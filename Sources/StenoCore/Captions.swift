/// One caption cue: a time range and 1...`maxLines` lines of text.
public struct CaptionCue: Sendable, Hashable {
    public var range: TimeRange
    public var lines: [String]

    public init(range: TimeRange, lines: [String]) {
        self.range = range
        self.lines = lines
    }
}

/// How finals are cut into cues: common broadcast caption rules.
public struct CaptionLayout: Sendable, Hashable {
    /// Longest line, in characters (a single longer word gets a line of its own).
    public var maxLineLength: Int
    /// Lines per cue.
    public var maxLines: Int
    /// Shortest cue, in seconds: time to read it.
    public var minDuration: Double
    /// Longest cue, in seconds (longer finals are split at word boundaries).
    public var maxDuration: Double

    public init(maxLineLength: Int = 42, maxLines: Int = 2, minDuration: Double = 1, maxDuration: Double = 7) {
        self.maxLineLength = max(1, maxLineLength)
        self.maxLines = max(1, maxLines)
        let shortest = minDuration.isFinite ? min(max(minDuration, 0), 60) : 1
        self.minDuration = shortest
        self.maxDuration = maxDuration.isFinite ? min(max(maxDuration, shortest, 0.001), 3600) : max(7, shortest)
    }
}

/// The caption files the server can render from finals.
public enum CaptionFormat: String, Sendable, Hashable, CaseIterable {
    case webVTT = "vtt"
    case srt = "srt"
    case plainText = "txt"
    case jsonLines = "jsonl"
    /// Scenarist SCC: CEA-608 pairs on 29.97 fps drop-frame timecode (see `SCCWriter`).
    case scc = "scc"
    /// TTML, IMSC 1.1 Text Profile and EBU-TT-D (see `TTML`).
    case ttml = "ttml"

    /// File extension (without dot), as in `/v1/channels/NAME/captions.vtt`.
    public var fileExtension: String { rawValue }

    /// HTTP `Content-Type`.
    public var contentType: String {
        switch self {
        case .webVTT: return "text/vtt; charset=utf-8"
        case .srt: return "application/x-subrip; charset=utf-8"
        case .plainText: return "text/plain; charset=utf-8"
        case .jsonLines: return "application/x-ndjson; charset=utf-8"
        case .scc: return "text/x-scc; charset=us-ascii"
        case .ttml: return "application/ttml+xml; charset=utf-8"
        }
    }
}

/// Renders finals as captions, cut into cues by `CaptionCueBuilder`'s rules.
///
/// Guarantees: cues are in time order and never overlap; each lasts from `minDuration` to
/// `maxDuration`; lines hold whole words and at most `maxLineLength` characters unless one
/// word alone is longer, at most `maxLines` of them; two-line cues are balanced (shorter or
/// equal top line). Cue times come from word times when the final has them, otherwise they
/// are interpolated by character position over the final's range.
public enum Captions {
    /// Renders in one of the formats.
    public static func render(_ finals: [RecognitionResult], as format: CaptionFormat,
                              layout: CaptionLayout = CaptionLayout(), includeWords: Bool = true) -> String {
        switch format {
        case .plainText: return plainText(finals)
        case .jsonLines: return jsonLines(finals, includeWords: includeWords)
        case .webVTT, .srt, .scc, .ttml: return render(finals, as: format, layout: layout, offset: 0)
        }
    }

    /// WebVTT: `WEBVTT`, a blank line, then cues `00:00:01.200 --> 00:00:02.480` separated by
    /// blank lines. `&`, `<` and `>` in text are escaped as the format requires.
    public static func webVTT(_ finals: [RecognitionResult], layout: CaptionLayout = CaptionLayout()) -> String {
        render(finals, as: .webVTT, layout: layout, offset: 0)
    }

    /// What a WebVTT file starts with, before its first cue.
    public static let webVTTHeader = "WEBVTT\n"

    /// One WebVTT cue as it follows the header or the previous cue: a blank line, the times,
    /// the lines (a file written cue by cue, as a live client does, is `webVTT`'s text).
    public static func webVTTCue(_ cue: CaptionCue) -> String {
        var out = "\n" + timestamp(cue.range.start, separator: ".") + " --> " + timestamp(cue.range.end, separator: ".") + "\n"
        for line in cue.lines { out += escapeVTT(line) + "\n" }
        return out
    }

    /// SubRip: numbered cues `1`, `00:00:01,200 --> 00:00:02,480`, lines, separated by blank lines.
    public static func srt(_ finals: [RecognitionResult], layout: CaptionLayout = CaptionLayout()) -> String {
        render(finals, as: .srt, layout: layout, offset: 0)
    }

    /// SubRip cue `number` (from 1), with the blank line that separates it from the one
    /// before (a file written cue by cue is `srt`'s text).
    public static func srtCue(_ cue: CaptionCue, number: Int) -> String {
        var out = number > 1 ? "\n" : ""
        out += "\(number)\n" + timestamp(cue.range.start, separator: ",") + " --> " + timestamp(cue.range.end, separator: ",") + "\n"
        for line in cue.lines { out += line + "\n" }
        return out
    }

    /// One final per line: `[00:00:01.200 → 00:00:02.480] hello world`.
    public static func plainText(_ finals: [RecognitionResult]) -> String {
        var out = ""
        for final in finals {
            let text = final.text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            out += "[" + timestamp(final.range.start, separator: ".") + " → "
                + timestamp(final.range.end, separator: ".") + "] " + text + "\n"
        }
        return out
    }

    /// The `final` wire events, one JSON object per line, `seq` 1, 2, 3 …
    public static func jsonLines(_ finals: [RecognitionResult], includeWords: Bool = true) -> String {
        var out = ""
        for (index, final) in finals.enumerated() {
            out += ServerEvent.final(final, includeWords: includeWords).encoded(seq: UInt64(index + 1)).text + "\n"
        }
        return out
    }

    /// `HH:MM:SS.mmm` (or with `,` for SRT); hours have at least two digits; negative and
    /// non-finite times are written as 0.
    public static func timestamp(_ seconds: Double, separator: Character) -> String {
        let clamped = seconds.isFinite ? min(max(seconds, 0), 3.6e9) : 0
        let ms = CoreMath.nearest(clamped * 1000) ?? 0
        let hours = ms / 3_600_000
        let minutes = (ms / 60_000) % 60
        let secs = (ms / 1000) % 60
        let millis = ms % 1000
        return digits(hours, 2) + ":" + digits(minutes, 2) + ":" + digits(secs, 2)
            + String(separator) + digits(millis, 3)
    }

    // MARK: Cues

    struct Token {
        var text: String
        var start: Double
        var end: Double
    }

    /// Splits finals into cues by the layout's rules (see `CaptionCueBuilder`); none starts
    /// before `previousEnd`.
    public static func cues(_ finals: [RecognitionResult], layout: CaptionLayout = CaptionLayout(),
                            after previousEnd: Double = 0) -> [CaptionCue] {
        var builder = CaptionCueBuilder(layout: layout, after: previousEnd)
        var cues: [CaptionCue] = []
        for final in finals { cues += builder.add(final) }
        return cues + builder.finish()
    }

    /// The final's words with times: the text's words timed by `words` when the counts agree,
    /// else `words` as they are, else the text's words timed by character position. The first
    /// starts at the final's start and the last ends at its end.
    static func tokens(of final: RecognitionResult) -> [Token] {
        var tokens = untrimmedTokens(of: final)
        if !tokens.isEmpty {
            tokens[0].start = final.range.start
            tokens[tokens.count - 1].end = max(final.range.end, tokens[tokens.count - 1].start)
        }
        return tokens
    }

    private static func untrimmedTokens(of final: RecognitionResult) -> [Token] {
        let textWords = final.text.split(whereSeparator: \.isWhitespace).map(String.init)
        let timed = final.words.filter { !$0.text.allSatisfy(\.isWhitespace) }
        if !timed.isEmpty {
            if timed.count == textWords.count {
                return zip(textWords, timed).map { Token(text: $0, start: $1.range.start, end: $1.range.end) }
            }
            return timed.flatMap { word in
                word.text.split(whereSeparator: \.isWhitespace).map {
                    Token(text: String($0), start: word.range.start, end: word.range.end)
                }
            }
        }
        let total = Double(textWords.reduce(0) { $0 + $1.count } + max(0, textWords.count - 1))
        guard total > 0 else { return [] }
        let start = final.range.start
        let span = max(0, final.range.end - start)
        var offset = 0.0
        var tokens: [Token] = []
        for word in textWords {
            let length = Double(word.count)
            tokens.append(Token(text: word, start: start + span * offset / total,
                                end: start + span * (offset + length) / total))
            offset += length + 1
        }
        return tokens
    }

    /// Breaks one cue's tokens into lines: one line if it fits; two balanced lines when
    /// `maxLines` is 2; otherwise greedy lines.
    static func lines(_ tokens: [Token], layout: CaptionLayout) -> [String] {
        let words = tokens.map(\.text)
        let oneLine = words.joined(separator: " ")
        if oneLine.count <= layout.maxLineLength || words.count == 1 { return [oneLine] }
        if layout.maxLines == 2 {
            // Choose the break that makes the longer line shortest; ties go to the shorter top line.
            var split = 1
            var bestLongest = Int.max
            var topLength = -1
            let total = oneLine.count
            for candidate in 1..<words.count {
                topLength += words[candidate - 1].count + 1
                let bottomLength = total - topLength - 1
                let longest = max(topLength, bottomLength)
                if longest < bestLongest {
                    bestLongest = longest
                    split = candidate
                }
            }
            return [words[..<split].joined(separator: " "), words[split...].joined(separator: " ")]
        }
        var lines: [String] = []
        var line = ""
        for word in words {
            if line.isEmpty {
                line = word
            } else if line.count + 1 + word.count <= layout.maxLineLength {
                line += " " + word
            } else {
                lines.append(line)
                line = word
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    static func escapeVTT(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.append(character)
            }
        }
        return out
    }

    private static func digits(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}
