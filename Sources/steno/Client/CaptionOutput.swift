import StenoCore
import StenoSystem

/// How `steno send` and `steno listen` print captions.
enum CaptionOutputFormat: String, CaseIterable, Sendable {
    /// One final per line, `[00:00:01.200 → 00:00:02.480] text`, as `steno transcribe` prints them.
    case text
    /// Every wire event as it arrived, one JSON object per line.
    case jsonl
    /// WebVTT, written cue by cue as finals come.
    case vtt
    /// SubRip, written cue by cue as finals come.
    case srt
    /// SCC (CEA-608 pop-on captions), written cue by cue as finals come.
    case scc
    /// TTML (IMSC 1.1 Text Profile), written cue by cue; the document is closed at the end.
    case ttml

    /// The caption file it writes, if it is one.
    var file: CaptionFormat? {
        switch self {
        case .text, .jsonl: nil
        case .vtt: .webVTT
        case .srt: .srt
        case .scc: .scc
        case .ttml: .ttml
        }
    }
}

/// Writes finals to standard output as they come, in one of the formats. Finals must come
/// in time order (the server's are; callers map them onto their own timeline first). Caption
/// files follow the caption rules of the server's files (`CaptionFileWriter`): a cue too
/// short to read waits for the next final, which may join it, or for `finish`.
final class CaptionWriter {
    let format: CaptionOutputFormat
    private let write: (String) -> Void
    private var file: CaptionFileWriter?
    private var finalsSinceFinish = false
    private var finished = false

    init(format: CaptionOutputFormat, write: @escaping (String) -> Void) {
        self.format = format
        self.write = write
        if let kind = format.file {
            var file = CaptionFileWriter(format: kind)
            let header = file.start()
            if !header.isEmpty { write(header) }
            self.file = file
        }
    }

    /// A final, in `text` or a caption file (jsonl prints events, see `event`).
    func final(_ result: RecognitionResult) {
        finalsSinceFinish = true
        if format == .text { write(Captions.plainText([result])) }
        if var file {
            let text = file.add(result)
            self.file = file
            if !text.isEmpty { write(text) }
        }
    }

    /// The captions are over for now (the session or broadcast ended, or the command stops):
    /// the cue still waiting for a next final is written (and a TTML document is closed: what
    /// follows starts a new one).
    func finish() {
        guard var file else { return }
        if file.format == .ttml {
            // One document for the finals since the last: none when there were none (but an
            // empty one rather than nothing at all).
            guard finalsSinceFinish || !finished else { return }
            write(file.finish())
            self.file = CaptionFileWriter(format: .ttml)
        } else {
            let text = file.finish()
            self.file = file
            if !text.isEmpty { write(text) }
        }
        finalsSinceFinish = false
        finished = true
    }

    /// A wire event, printed as it came in `jsonl`.
    func event(_ message: ServerMessage) {
        if format == .jsonl { write(message.text + "\n") }
    }
}

/// The volatile result on a terminal's standard error, rewritten in place, and log lines that
/// do not get mixed into it. Off when standard error is not a terminal (then only log lines).
final class StatusLine: Sendable {
    private struct State {
        var shown = ""
    }
    private let state = Locked(State())
    let isTerminal: Bool

    init(isTerminal: Bool = StandardStreams.isTerminal(2)) {
        self.isTerminal = isTerminal
    }

    /// Shows `text` as the current volatile (empty: clears it).
    func show(_ text: String) {
        guard isTerminal else { return }
        let width = max(10, (StandardStreams.terminalWidth(2) ?? 80) - 1)
        var line = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        if line.count > width - 2 { line = "…" + String(line.suffix(width - 3)) }
        state.withLock { s in
            guard s.shown != line else { return }
            StandardStreams.stderr("\r\u{1B}[K" + (line.isEmpty ? "" : "\u{1B}[2m" + line + "\u{1B}[0m"))
            s.shown = line
        }
    }

    /// Runs `body` (which writes a line somewhere) with the volatile line out of the way.
    func around(_ body: () -> Void) {
        state.withLock { s in
            if isTerminal && !s.shown.isEmpty { StandardStreams.stderr("\r\u{1B}[K") }
            body()
            if isTerminal && !s.shown.isEmpty { StandardStreams.stderr("\u{1B}[2m" + s.shown + "\u{1B}[0m") }
        }
    }

    /// A log line on standard error.
    func log(_ line: String) {
        around { StandardStreams.stderr(line + "\n") }
    }
}
