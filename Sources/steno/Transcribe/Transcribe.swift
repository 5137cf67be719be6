import StenoAudio
import StenoCore
import StenoServer
import StenoSession
import StenoSpeech
import StenoSystem

#if canImport(Glibc)
import Glibc
#endif

/// `steno transcribe FILE`: a WAV file through the same session pipeline the server runs
/// (the protocol state machine, decoding, resampling, recognition), printed as text, wire
/// events (JSON lines), WebVTT or SRT.
enum Transcribe {
    /// The same formats as `steno send` and `listen` print.
    typealias Format = CaptionOutputFormat

    struct Options {
        var file = ""
        var format = Format.text
        /// `--model` as given (read into `settings`); nil: the engine's own.
        var model: String?
        var chunkMilliseconds = 100
        var words = true
        var progress = true
        var text = TextFormat.readable
        /// The `--phrases` file (read when the command runs).
        var phrasesFile: String?
        var boost: Double?
        var alternatives = 0
        /// What the engine is loaded with (`EngineRegistry.load`, as `steno serve` loads it): the
        /// engines' defaults on this machine, the engine (`transcribeEngine`), `--model`, and the
        /// engines' own flags (`--max-utterance`, `--decoder`, `--endpointing`).
        var settings: ServerOptions

        /// `--max-utterance`.
        var maxUtterance: Double { settings.maxUtteranceSeconds }
    }

    enum Flags {
        static let format = Flag("format", value: "F", help: "text: one final per line, [start → end] text; jsonl: the wire events; vtt, srt, scc, ttml: captions",
                                 default: Format.text.rawValue)
        static let phrases = Flag("phrases", value: "FILE", help: PhraseFile.help)
        static let boost = Flag("boost", value: "B", help: PhraseFile.boostHelp, default: "1")
        static let alternatives = Flag("alternatives", value: "N", help: "jsonl: finals carry up to N alternative texts (0-\(StartRequest.maxAlternatives))",
                                       default: "0")
        static let chunkMilliseconds = Flag("chunk-ms", value: "N", help: "audio per message sent to the session, ms", default: "100")
        static let noWords = Flag.toggle("no-words", help: "leave word timings out of jsonl output")
        static let noProgress = Flag.toggle("no-progress", help: "no progress bar on stderr")
        static let text = Flag("text", value: "T", help: TextFormat.flagHelp, default: TextFormat.readable.rawValue)
    }

    /// The command, with `engines`' `--engine`, `--model` and own flags (`defaults`: what they
    /// start from, for their help).
    static func spec(_ engines: EngineRegistry, _ defaults: ServerOptions) -> CommandSpec {
        CommandSpec(
            command: "steno transcribe", arguments: "FILE", maxArguments: 1,
            summary: """
                Transcribes a WAV file (PCM 8-32 bit or float, mono or stereo, 8-48 kHz) through the
                same session pipeline as the server, and prints its finals.
                """,
            flags: [Flags.format, engines.transcribeEngineFlag(defaults), engines.transcribeModelFlag(defaults), Flags.phrases,
                    Flags.boost, Flags.alternatives, Flags.chunkMilliseconds]
                + engines.transcribeRows(defaults).map(\.flag) + [Flags.noWords, Flags.noProgress, Flags.text])
    }

    /// The engine that transcribes: a prefixed model's (`whisper:DIR`), else `--engine`, else
    /// the model's, else `steno serve`'s default.
    static func transcribeEngine(_ engines: EngineRegistry, named: String?, model: String?, default: String) -> String {
        let owner = model.flatMap(engines.owner(ofModel:))?.provider
        if let owner, case .prefixed = owner.modelSpecs { return owner.name }
        return named ?? owner?.name ?? `default`
    }

    /// The options, or nil when the help text was asked for. The engines' defaults are found on
    /// this machine (`MachineDefaults.detect`: where the Whisper worker is).
    static func parse(_ arguments: [String], engines: EngineRegistry = .standard) throws(UsageError) -> Options? {
        let defaults = engines.defaults(MachineDefaults.detect())
        let given = try spec(engines, defaults).parse(arguments)
        if given.helpRequested { return nil }
        var options = Options(settings: defaults)
        if let value = given.single(Flags.format) {
            options.format = Format(rawValue: try given.choice(value, Format.allCases.map(\.rawValue)))!
        }
        if let value = given.single(engines.transcribeModelFlag(defaults)) {
            try engines.read(models: [value], given, into: &options.settings)
            options.model = value.text
        }
        let named = try given.single(engines.transcribeEngineFlag(defaults)).map { (value) throws(UsageError) in
            try given.choice(value, engines.names)
        }
        options.settings.engine = transcribeEngine(engines, named: named, model: options.model, default: defaults.engine)
        if let value = given.single(Flags.phrases) { options.phrasesFile = try given.path(value) }
        options.boost = try PhraseFile.boost(given, Flags.boost, phrases: Flags.phrases)
        if let value = given.single(Flags.alternatives) {
            options.alternatives = try given.integer(value, in: 0...StartRequest.maxAlternatives)
        }
        if let value = given.single(Flags.chunkMilliseconds) {
            options.chunkMilliseconds = try given.integer(value, in: 1...10_000)
        }
        for row in engines.transcribeRows(defaults) { try row.read(given, row.flag, &options.settings) }
        options.words = !given.isOn(Flags.noWords)
        options.progress = !given.isOn(Flags.noProgress)
        if let value = given.single(Flags.text) {
            options.text = TextFormat(rawValue: try given.choice(value, TextFormat.allCases.map(\.rawValue)))!
        }
        guard let file = given.arguments.first else { throw given.error(.missingArgument("FILE")) }
        options.file = file
        return options
    }

    static func run(_ arguments: [String]) -> Int32 {
        let options: Options
        do throws(UsageError) {
            guard let parsed = try parse(arguments) else {
                StandardStreams.stdout(spec(.standard, EngineRegistry.standard.defaults(MachineDefaults.detect())).helpText())
                return 0
            }
            options = parsed
        } catch {
            StandardStreams.stderr("steno transcribe: \(error)\n")
            return 2
        }
        var phrases: [String] = []
        if let path = options.phrasesFile {
            switch PhraseFile.read(path) {
            case .success(let read): phrases = read
            case .failure(let error):
                StandardStreams.stderr("steno transcribe: --phrases \(path): \(error.message)\n")
                return 2
            }
        }
        do throws(StenoError) {
            return try transcribe(options.file, options, phrases: phrases)
        } catch {
            StandardStreams.stderr("steno transcribe: \(options.file): \(error.message)\n")
            return 1
        }
    }

    /// An `error` event as a line for people: its message (the JSON when it has none).
    static func message(ofError json: String) -> String {
        guard case .object(let object)? = try? JSONParser().parse(json),
              case .string(let message)? = object["message"] else { return json }
        return message
    }

    /// Transcribes `file` with the engine `engines` load from the options' settings.
    static func transcribe(_ file: String, _ options: Options, phrases: [String] = [],
                           engines: EngineRegistry = .standard) throws(StenoError) -> Int32 {
        let wav = try WAVFile(path: file)
        let format = try wav.wireFormat()
        guard wav.frameCount > 0 else { throw StenoError(.badAudio, "the file holds no audio") }

        let engine = try engines.load(options.settings, log: Log(minimum: .warning))
        let session = LocalSession(engine: engine)
        let bar = ProgressBar(total: wav.duration,
                              enabled: options.progress && StandardStreams.isTerminal(2))
        var printed = 0
        session.onEvent = { event in
            switch options.format {
            case .jsonl:
                bar.clear()
                StandardStreams.stdout(event.text + "\n")
            case _ where event.kind == .error:
                // How the phrases were taken (a word left out), and any other warning.
                bar.clear()
                StandardStreams.stderr("steno transcribe: \(Self.message(ofError: event.text))\n")
            case .text where event.kind == .final:
                // Events come once their step is done: the finals since the last one printed.
                let finals = session.finals
                if finals.count > printed {
                    bar.clear()
                    StandardStreams.stdout(Captions.plainText(Array(finals[printed...])))
                    printed = finals.count
                }
            default:
                break
            }
        }

        session.start(format: format, words: options.words, text: options.text, phrases: phrases, boost: options.boost,
                      alternatives: options.alternatives)
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
        case .vtt, .srt, .scc, .ttml: StandardStreams.stdout(Captions.render(session.finals, as: options.format.file!))
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
        StandardStreams.stderr("\r\(bar) \(Int(fraction * 100))%  \(format(seconds)) / \(format(total))")
        drawn = true
    }

    func clear() {
        guard enabled, drawn else { return }
        StandardStreams.stderr("\r\u{1B}[K")
        drawn = false
        lastDraw = -1
    }

    private func format(_ seconds: Double) -> String {
        let s = Int(seconds)
        return "\(s / 60):" + (s % 60 < 10 ? "0" : "") + "\(s % 60)"
    }
}
