import StenoAudio
import StenoCore
import StenoSession
import StenoSpeech

#if canImport(Glibc)
import Glibc
#endif

/// `steno transcribe FILE`: a WAV file through the same session pipeline the server runs
/// (the protocol state machine, decoding, resampling, recognition), printed as text, wire
/// events (JSON lines), WebVTT or SRT.
enum Transcribe {
    static let help = """
        usage: steno transcribe FILE [options]

        Transcribes a WAV file (PCM 8-32 bit or float, mono or stereo, 8-48 kHz) through the
        same session pipeline as the server.

        options:
          --format F            text (default): one final per line, [start → end] text
                                jsonl: the wire protocol's events, one JSON object per line
                                vtt, srt: caption files
          --model DIR           pocketsphinx model directory (default \(PocketSphinxConfiguration.debianModelDirectory))
          --chunk-ms N          audio per message sent to the session (default 100)
          --max-utterance S     force a final after S seconds of continuous speech (default 15)
          --no-words            leave word timings out of jsonl output
          --no-progress         no progress bar on stderr
          -h, --help            this text

        """

    enum Format: String { case text, jsonl, vtt, srt }

    struct Options {
        var file: String?
        var format = Format.text
        var model = PocketSphinxConfiguration.debianModelDirectory
        var chunkMilliseconds = 100
        var maxUtterance = 15.0
        var words = true
        var progress = true
    }

    static func run(_ arguments: [String]) -> Int32 {
        var options = Options()
        var index = 0
        func value(_ flag: String) -> String? {
            index += 1
            guard index < arguments.count else {
                FileHandleOutput.stderr("steno transcribe: \(flag) needs a value\n")
                return nil
            }
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "-h", "--help":
                FileHandleOutput.stdout(help)
                return 0
            case "--format":
                guard let v = value(argument) else { return 2 }
                guard let format = Format(rawValue: v) else {
                    FileHandleOutput.stderr("steno transcribe: --format must be text, jsonl, vtt or srt, not '\(v)'\n")
                    return 2
                }
                options.format = format
            case "--model":
                guard let v = value(argument) else { return 2 }
                options.model = v
            case "--chunk-ms":
                guard let v = value(argument) else { return 2 }
                guard let n = Int(v), (1...10_000).contains(n) else {
                    FileHandleOutput.stderr("steno transcribe: --chunk-ms must be a whole number from 1 to 10000, not '\(v)'\n")
                    return 2
                }
                options.chunkMilliseconds = n
            case "--max-utterance":
                guard let v = value(argument) else { return 2 }
                guard let s = Double(v), s > 0, s.isFinite else {
                    FileHandleOutput.stderr("steno transcribe: --max-utterance must be a positive number of seconds, not '\(v)'\n")
                    return 2
                }
                options.maxUtterance = s
            case "--no-words":
                options.words = false
            case "--no-progress":
                options.progress = false
            default:
                if argument.hasPrefix("-") && argument != "-" {
                    FileHandleOutput.stderr("steno transcribe: unknown option '\(argument)'\n\n" + help)
                    return 2
                }
                guard options.file == nil else {
                    FileHandleOutput.stderr("steno transcribe: one file at a time ('\(argument)' is extra)\n")
                    return 2
                }
                options.file = argument
            }
            index += 1
        }
        guard let file = options.file else {
            FileHandleOutput.stderr("steno transcribe: which file?\n\n" + help)
            return 2
        }
        do throws(StenoError) {
            return try transcribe(file, options)
        } catch {
            FileHandleOutput.stderr("steno transcribe: \(file): \(error.message)\n")
            return 1
        }
    }

    static func transcribe(_ file: String, _ options: Options) throws(StenoError) -> Int32 {
        let wav = try WAVFile(path: file)
        let format = try wav.wireFormat()
        guard wav.frameCount > 0 else { throw StenoError(.badAudio, "the file holds no audio") }

        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(
            modelDirectory: options.model, maxUtteranceSeconds: options.maxUtterance))
        let session = LocalSession(engine: engine)
        let bar = ProgressBar(total: wav.duration,
                              enabled: options.progress && FileHandleOutput.isTerminal(2))
        session.onEvent = { event in
            switch options.format {
            case .jsonl:
                bar.clear()
                FileHandleOutput.stdout(event.text + "\n")
            case .text where event.kind == .final:
                if let final = session.finals.last {
                    bar.clear()
                    FileHandleOutput.stdout(Captions.plainText([final]))
                }
            default:
                break
            }
        }

        session.start(format: format, words: options.words)
        let bytes = wav.f32leBytes
        let frameBytes = 4 * wav.channels
        let chunk = max(1, wav.sampleRate * options.chunkMilliseconds / 1000) * frameBytes
        var offset = 0
        while offset < bytes.count, session.closeCode == nil {
            let end = min(bytes.count, offset + chunk)
            session.send(audio: Array(bytes[offset..<end]))
            offset = end
            bar.update(Double(offset / frameBytes) / Double(wav.sampleRate))
        }
        session.end()
        bar.clear()

        switch options.format {
        case .vtt: FileHandleOutput.stdout(Captions.webVTT(session.finals))
        case .srt: FileHandleOutput.stdout(Captions.srt(session.finals))
        case .text, .jsonl: break
        }
        guard session.closeCode == 1000 else {
            let error = session.events.last { $0.kind == .error }
            throw StenoError(.internal, error.map { "the session failed: \($0.text)" } ?? "the session did not end cleanly")
        }
        return 0
    }
}

/// A one-line progress bar on stderr, redrawn at most ten times a second.
final class ProgressBar {
    private let total: Double
    private let enabled: Bool
    private var lastDraw = -1.0
    private var drawn = false

    init(total: Double, enabled: Bool) {
        self.total = max(total, 0.001)
        self.enabled = enabled
    }

    func update(_ seconds: Double) {
        guard enabled else { return }
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let now = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        guard now - lastDraw >= 0.1 || seconds >= total else { return }
        lastDraw = now
        let fraction = min(1, seconds / total)
        let width = 30
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        FileHandleOutput.stderr("\r\(bar) \(Int(fraction * 100))%  \(format(seconds)) / \(format(total))")
        drawn = true
    }

    func clear() {
        guard enabled, drawn else { return }
        FileHandleOutput.stderr("\r\u{1B}[K")
        drawn = false
        lastDraw = -1
    }

    private func format(_ seconds: Double) -> String {
        let s = Int(seconds)
        return "\(s / 60):" + (s % 60 < 10 ? "0" : "") + "\(s % 60)"
    }
}
