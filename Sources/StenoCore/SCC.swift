/// Writes SCC (Scenarist Closed Caption) files cue by cue: CEA-608 pairs on channel 1 at
/// 29.97 fps, each line a drop-frame timecode and the pairs sent from that frame on, one a
/// frame.
///
/// Pop-on (the default): each cue is loaded into the caption memory the viewer does not see
/// (erase it, then the rows) and shown whole by "end of caption", timed so that it shows at
/// the cue's start; the caption is erased at the cue's end unless the next one replaces it
/// by then. Roll-up: each line of a cue is written on the bottom row as it comes (spread over
/// the cue), the rows above rolling up; the screen is erased at a cue's end when a pause
/// follows. Pairs never overlap: when a cue's pairs cannot all be sent before its start, it
/// shows a few frames late (at most its own length: about a second for four full rows).
public struct SCCWriter: Sendable {
    public enum Mode: String, Sendable, CaseIterable {
        case popOn = "popon"
        case rollUp = "rollup"
    }

    public let mode: Mode
    /// Rows of a roll-up caption (2...4).
    public let rollUpRows: Int
    /// The last frame already given a pair.
    private var lastFrame = -1
    /// Where the caption on screen ends, when it is still to be erased.
    private var eraseAt: Int?

    /// What an SCC file starts with.
    public static let header = "Scenarist_SCC V1.0\n"
    /// Frames a second.
    public static let frameRate = 30000.0 / 1001.0

    public init(mode: Mode = .popOn, rollUpRows: Int = 2) {
        self.mode = mode
        self.rollUpRows = min(max(rollUpRows, 2), 4)
    }

    /// The lines (each after a blank line) that write `cue`, and erase the one before it.
    /// Cues come in time order, not overlapping, in 608's characters with lines of at most
    /// 32 (see `CaptionLayout.cea608`).
    public mutating func add(_ cue: CaptionCue) -> String {
        let start = Self.frame(cue.range.start)
        let end = max(Self.frame(cue.range.end), start + 1)
        switch mode {
        case .popOn: return popOn(cue, display: start, end: end)
        case .rollUp: return rollUp(cue, start: start, end: end)
        }
    }

    /// No more cues: the erasing of the last one.
    public mutating func finish() -> String {
        guard let at = eraseAt else { return "" }
        eraseAt = nil
        return line(max(at, lastFrame + 1), CEA608.command(.eraseDisplayedMemory))
    }

    private mutating func popOn(_ cue: CaptionCue, display: Int, end: Int) -> String {
        var units: [[CEA608.Pair]] = [CEA608.command(.resumeCaptionLoading), CEA608.command(.eraseNonDisplayedMemory)]
        let lines = Array(cue.lines.prefix(CEA608.maxRows))
        for (index, text) in lines.enumerated() {
            let row = 15 - (lines.count - 1) + index
            units.append(CEA608.position(row: row, column: max(0, (CEA608.columns - text.count) / 2)))
            units += CEA608.pairs(writing: text).map { [$0] }
        }
        units.append(CEA608.command(.endOfCaption))
        let count = units.reduce(0) { $0 + $1.count }

        var out = ""
        var erase = eraseAt
        eraseAt = nil
        // The new caption replaces the old one when it shows: no need to erase it first.
        if let at = erase, display <= at + 1 { erase = nil }
        // The first of the two "end of caption" pairs, the one a decoder acts on, at `display`.
        var first = display - count + 2
        if let at = erase, at >= first { first -= 2 }
        first = max(first, lastFrame + 1)
        if let at = erase, at < first {
            out += line(max(at, lastFrame + 1), CEA608.command(.eraseDisplayedMemory))
            first = max(first, lastFrame + 1)
            erase = nil
        }
        var pairs: [CEA608.Pair] = []
        for unit in units {
            if let at = erase, first + pairs.count >= at {
                pairs += CEA608.command(.eraseDisplayedMemory)
                erase = nil
            }
            pairs += unit
        }
        out += line(first, pairs)
        eraseAt = max(end, lastFrame + 1)
        return out
    }

    private mutating func rollUp(_ cue: CaptionCue, start: Int, end: Int) -> String {
        var out = ""
        if let at = eraseAt {
            eraseAt = nil
            if start > at + 1 { out += line(max(at, lastFrame + 1), CEA608.command(.eraseDisplayedMemory)) }
        }
        let depth: CEA608.Command = switch rollUpRows {
        case 2: .rollUp2
        case 3: .rollUp3
        default: .rollUp4
        }
        let lines = cue.lines.isEmpty ? [""] : cue.lines
        for (index, text) in lines.enumerated() {
            let at = start + (end - start) * index / lines.count
            let pairs = CEA608.command(depth) + CEA608.command(.carriageReturn) + CEA608.position(row: 15, column: 0)
                + CEA608.pairs(writing: text)
            out += line(max(at, lastFrame + 1), pairs)
        }
        eraseAt = max(end, lastFrame + 1)
        return out
    }

    /// One line: a blank line, the timecode of `frame`, a tab, the pairs.
    private mutating func line(_ frame: Int, _ pairs: [CEA608.Pair]) -> String {
        lastFrame = frame + pairs.count - 1
        return "\n" + Self.timecode(frame: frame) + "\t" + pairs.map(CEA608.hex).joined(separator: " ") + "\n"
    }

    /// The frame at `seconds` (29.97 a second, from 0).
    public static func frame(_ seconds: Double) -> Int {
        let frames = seconds.isFinite ? seconds * frameRate : 0
        return Int(min(max(frames, 0), 1e12).rounded())
    }

    /// Drop-frame timecode `HH:MM:SS;FF` of a frame count: frame numbers 0 and 1 are skipped
    /// at the start of every minute except each tenth, so that the timecode keeps to the clock.
    public static func timecode(frame: Int) -> String {
        let tenMinutes = 17_982   // frames in ten minutes at 29.97
        let minute = 1_798        // frames in a dropping minute
        let blocks = frame / tenMinutes
        let rest = frame % tenMinutes
        let dropped = 18 * blocks + (rest < 2 ? 0 : 2 * ((rest - 2) / minute))
        let n = frame + dropped
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return two(n / 108_000) + ":" + two(n / 1_800 % 60) + ":" + two(n / 30 % 60) + ";" + two(n % 30)
    }
}
