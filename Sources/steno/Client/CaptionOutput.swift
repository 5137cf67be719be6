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
}

/// Writes finals to standard output as they come, in one of the formats. Finals must come
/// in time order (the server's are; callers map them onto their own timeline first). VTT and
/// SRT cues follow the caption rules of the server's files (`CaptionCueBuilder`): a cue too
/// short to read waits for the next final, which may join it, or for `finish`.
final class CaptionWriter {
    let format: CaptionOutputFormat
    private let write: (String) -> Void
    private var cues = 0
    private var builder = CaptionCueBuilder()

    init(format: CaptionOutputFormat, write: @escaping (String) -> Void) {
        self.format = format
        self.write = write
        if format == .vtt { write(Captions.webVTTHeader) }
    }

    /// A final, in `text`, `vtt` or `srt` (jsonl prints events, see `event`).
    func final(_ result: RecognitionResult) {
        switch format {
        case .text:
            write(Captions.plainText([result]))
        case .vtt, .srt:
            written(builder.add(result))
        case .jsonl:
            break
        }
    }

    /// The captions are over for now (the session or broadcast ended, or the command stops):
    /// the cue still waiting for a next final is written.
    func finish() {
        if format == .vtt || format == .srt { written(builder.finish()) }
    }

    private func written(_ settled: [CaptionCue]) {
        var out = ""
        for cue in settled {
            cues += 1
            out += format == .vtt ? Captions.webVTTCue(cue) : Captions.srtCue(cue, number: cues)
        }
        if !out.isEmpty { write(out) }
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
