/// Cuts finals into caption cues as they come, by common broadcast caption rules
/// (`CaptionLayout`): at most `maxLines` lines of at most `maxLineLength` characters, cues
/// lasting from `minDuration` to `maxDuration`, never overlapping.
///
/// The rules, in order (web-client/transcript.js does exactly the same):
/// 1. A final's words fill a cue while they fit its lines (counted greedily, line by line) and
///    the cue, from its start to the word's end, stays within `maxDuration`; then a new cue
///    begins. The first word of a final starts at the final's start, its last ends at its end.
/// 2. A cue never starts before the previous one ends (it starts later instead).
/// 3. A cue shorter than `minDuration` at the end of its final waits for the next final: if
///    that starts at least `minDuration` after the cue's start (or there is none), the cue is
///    lengthened to `minDuration`; otherwise the next final's first words join it, as many as
///    fit by rule 1.
/// 4. Any other cue shorter than `minDuration` (no more words fit it) is lengthened to
///    `minDuration`, and the next cue starts when it ends (rule 2).
/// 5. No cue lasts longer than `maxDuration` (a single word that does is cut short).
///
/// `add` returns the cues that are settled; a short cue waits (rule 3) until the next final,
/// `settle(before:)` or `finish`. Cues come out in time order, once each, and never change.
/// The cues of a list of finals do not depend on how they were given, nor on `settle` calls
/// whose time no later final starts before.
public struct CaptionCueBuilder: Sendable {
    public let layout: CaptionLayout
    /// Where the next cue may start: the end of the last one given out.
    public private(set) var floor: Double
    /// The short cue waiting for the next final (rule 3).
    private var pending: Cue?

    struct Cue: Sendable {
        var tokens: [Captions.Token] = []
        var start = 0.0
        var end = 0.0
        var linesUsed = 1
        var lineLength = 0

        var duration: Double { end - start }
    }

    public init(layout: CaptionLayout = CaptionLayout(), after floor: Double = 0) {
        self.layout = layout
        self.floor = floor.isFinite ? floor : 0
    }

    /// The start of the cue waiting for the next final, if any: nothing before it is settled.
    public var pendingStart: Double? { pending?.start }

    /// The next final (finals come in time order); returns the cues now settled.
    public mutating func add(_ final: RecognitionResult) -> [CaptionCue] {
        let tokens = Captions.tokens(of: final)
        guard let first = tokens.first else { return [] }
        var out: [CaptionCue] = []
        var current: Cue?
        if let waiting = pending {
            pending = nil
            if first.start >= waiting.start + layout.minDuration {
                out.append(close(waiting))
            } else {
                current = waiting
            }
        }
        for token in tokens {
            if var cue = current {
                if fits(token, in: &cue) {
                    current = cue
                    continue
                }
                out.append(close(cue))
            }
            current = begin(token)
        }
        if let cue = current {
            if cue.duration >= layout.minDuration { out.append(close(cue)) } else { pending = cue }
        }
        return out
    }

    /// No final will start before `time`: a waiting cue that the next final could no longer
    /// join is settled (lengthened to `minDuration`).
    public mutating func settle(before time: Double) -> [CaptionCue] {
        guard let waiting = pending, time >= waiting.start + layout.minDuration else { return [] }
        pending = nil
        return [close(waiting)]
    }

    /// No more finals: the cue still waiting, if any.
    public mutating func finish() -> [CaptionCue] {
        guard let waiting = pending else { return [] }
        pending = nil
        return [close(waiting)]
    }

    // MARK: -

    private func begin(_ token: Captions.Token) -> Cue {
        let start = max(token.start, floor)
        return Cue(tokens: [token], start: start, end: max(token.end, start), linesUsed: 1, lineLength: token.text.count)
    }

    /// Adds `token` to `cue` if it fits its lines and its longest duration (rule 1).
    private func fits(_ token: Captions.Token, in cue: inout Cue) -> Bool {
        guard token.end - cue.start <= layout.maxDuration else { return false }
        let length = token.text.count
        if cue.lineLength + 1 + length <= layout.maxLineLength {
            cue.lineLength += 1 + length
        } else if cue.linesUsed < layout.maxLines {
            cue.linesUsed += 1
            cue.lineLength = length
        } else {
            return false
        }
        cue.tokens.append(token)
        cue.end = max(cue.end, token.end)
        return true
    }

    /// Gives a cue out, lengthened to the shortest or cut to the longest duration.
    private mutating func close(_ cue: Cue) -> CaptionCue {
        var end = max(cue.end, cue.start + layout.minDuration)
        end = min(end, cue.start + layout.maxDuration)
        floor = end
        return CaptionCue(range: TimeRange(start: cue.start, end: end), lines: Captions.lines(cue.tokens, layout: layout))
    }
}
