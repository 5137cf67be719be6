import StenoCore

/// A channel's finals, and with `liveWords` its volatiles, as the captions a live caption
/// inserter shows one at a time (OBS's CEA-608 in the stream, YouTube's ingestion). Pure:
/// time is passed in (monotonic seconds), captions come out of `due(now:)`.
///
/// - Finals are cut into cues by the caption rules (`CaptionCueBuilder`) within 608's 32
///   columns and 2 rows; a short cue waiting for the next final goes alone after `idleSettle`
///   seconds without one (0: at once, for a live picture, where pacing keeps it up long
///   enough to read).
/// - `paced`: a caption stays up as long as its words took to say (at least `minDuration`,
///   at most `maxDuration`; only `minDuration` when two more are waiting, to catch up), so
///   cues cut from one long final do not flash past.
/// - `liveWords`: instead of cues, the last two rows of the words so far, growing as words
///   become stable (the same in two volatiles in a row), at most every `liveInterval` seconds.
/// - `clearAfter`: an empty caption once nothing new has come for that long after the last.
struct LiveCaptions: Sendable {
    struct Caption: Sendable, Equatable {
        /// The rows; empty clears the screen.
        var lines: [String]
        /// Audio time of its first word, on the channel's timeline (nil for a clear or live words).
        var spokenAt: Double?
        /// How long its words took to say.
        var duration: Double = 0

        var text: String { lines.joined(separator: "\n") }
    }

    let layout: CaptionLayout
    let paced: Bool
    let liveWords: Bool
    let clearAfter: Double?
    /// Text in CEA-608's characters.
    let in608: Bool
    let idleSettle: Double
    static let liveInterval = 0.5

    private var builder: CaptionCueBuilder
    private var queue: [Caption] = []
    private var showUntil = -Double.infinity
    private var lastFinalAt: Double?
    private var shown: [String] = []
    private var clearAt: Double?
    // Live words.
    private var committed: [String] = []
    private var previousGuess: [String] = []
    private var stable: [String] = []
    private var lastLiveSend = -Double.infinity

    init(layout: CaptionLayout = CaptionLayout().cea608, paced: Bool, liveWords: Bool = false, clearAfter: Double? = nil,
         in608: Bool = true, idleSettle: Double = 1.5) {
        self.layout = layout
        self.idleSettle = idleSettle
        self.paced = paced
        self.liveWords = liveWords
        self.clearAfter = clearAfter
        self.in608 = in608
        builder = CaptionCueBuilder(layout: layout)
    }

    /// A new timeline (another publisher, times from 0 again): what waits is dropped.
    mutating func restart() {
        self = LiveCaptions(layout: layout, paced: paced, liveWords: liveWords, clearAfter: clearAfter, in608: in608,
                            idleSettle: idleSettle)
    }

    mutating func final(_ result: RecognitionResult, now: Double) {
        let result = in608 ? CaptionFileWriter.in608(result) : result
        lastFinalAt = now
        if liveWords {
            committed += Self.words(result.text)
            previousGuess = []
            stable = []
            let lines = Self.wrap(committed, width: layout.maxLineLength)
            if lines.count > layout.maxLines {
                committed.removeFirst(min(committed.count, lines.prefix(lines.count - layout.maxLines).joined().count))
            }
            return
        }
        queue += builder.add(result).map(Self.caption)
    }

    mutating func volatile(_ text: String, now: Double) {
        guard liveWords else { return }
        let guess = Self.words(in608 ? CEA608.transliterated(text) : text)
        stable = Array(zip(previousGuess, guess).prefix { $0 == $1 }.map(\.0))
        previousGuess = guess
    }

    /// The broadcast ended: the cue waiting for a next final goes now.
    mutating func finish(now: Double) {
        if !liveWords { queue += builder.finish().map(Self.caption) }
    }

    /// The captions to show now, in order (more than one only when not paced).
    mutating func due(now: Double) -> [Caption] {
        var out: [Caption] = []
        if !liveWords, builder.pendingStart != nil, let last = lastFinalAt, now - last >= idleSettle {
            queue += builder.finish().map(Self.caption)
        }
        if liveWords {
            let lines = liveLines
            if lines != shown, !lines.isEmpty, now >= lastLiveSend + Self.liveInterval {
                out.append(Caption(lines: lines))
                shown = lines
                lastLiveSend = now
                clearAt = clearAfter.map { now + $0 }
            }
        } else {
            while let next = queue.first, !paced || now >= showUntil {
                queue.removeFirst()
                out.append(next)
                shown = next.lines
                let hold = queue.count >= 2 ? layout.minDuration : min(max(next.duration, layout.minDuration), layout.maxDuration)
                showUntil = now + hold
                clearAt = clearAfter.map { now + max(hold, $0) }
            }
        }
        if let at = clearAt, now >= at, queue.isEmpty, !shown.isEmpty {
            out.append(Caption(lines: []))
            shown = []
            clearAt = nil
        }
        return out
    }

    /// When `due` may next have something (nil: only after new input).
    var nextDue: Double? {
        var times: [Double] = []
        if !queue.isEmpty { times.append(paced ? showUntil : -Double.infinity) }
        if !liveWords, builder.pendingStart != nil, let last = lastFinalAt { times.append(last + idleSettle) }
        if liveWords, liveLines != shown, !liveLines.isEmpty { times.append(lastLiveSend + Self.liveInterval) }
        if let at = clearAt, !shown.isEmpty { times.append(at) }
        return times.min()
    }

    /// The last rows of the words so far (live words).
    private var liveLines: [String] {
        Self.wrap(committed + stable, width: layout.maxLineLength).suffix(layout.maxLines).map { $0.joined(separator: " ") }
    }

    private static func caption(_ cue: CaptionCue) -> Caption {
        Caption(lines: cue.lines, spokenAt: cue.range.start, duration: cue.range.end - cue.range.start)
    }

    static func words(_ text: String) -> [String] {
        text.split(whereSeparator: \.isWhitespace).map(String.init)
    }

    /// Words in rows of at most `width` characters, greedily (a longer word alone on its row).
    static func wrap(_ words: [String], width: Int) -> [[String]] {
        var rows: [[String]] = []
        var row: [String] = []
        var length = 0
        for word in words {
            if !row.isEmpty, length + 1 + word.count > width {
                rows.append(row)
                row = []
                length = 0
            }
            length += (row.isEmpty ? 0 : 1) + word.count
            row.append(word)
        }
        if !row.isEmpty { rows.append(row) }
        return rows
    }
}
