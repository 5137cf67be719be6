import StenoAudio
import StenoCore
import StenoServer
import StenoSession
import StenoSpeech
import StenoSystem
import StenoWhisper

#if canImport(Glibc)
import Glibc
#endif

/// `steno transcribe FILE`: a WAV file through the same session pipeline the server runs
/// (the protocol state machine, decoding, resampling, recognition), printed as text, wire
/// events (JSON lines), WebVTT or SRT.
enum Transcribe {
    enum Format: String, CaseIterable { case text, jsonl, vtt, srt }

    struct Options {
        var file = ""
        var format = Format.text
        /// `--model`; nil: the engine's own (Whisper's tiny.en, or Debian's pocketsphinx model).
        var model: String?
        /// `--engine`; nil: the model's (a `whisper:` folder is Whisper's, any other pocketsphinx's),
        /// or when no model is given `steno serve`'s default (`ServerOptions.engine`).
        var engine: String?
        var chunkMilliseconds = 100
        var maxUtterance = 15.0
        var words = true
        var progress = true
        var text = TextFormat.readable
        /// The `--phrases` file (read when the command runs).
        var phrasesFile: String?
        var boost: Double?
        var alternatives = 0
        /// `--decoder`: pocketsphinx options after Steno's defaults.
        var decoderArguments: [String] = []
        /// `--endpointing`; nil: the engine's default.
        var endpointing: Endpointing?

        /// The engine that transcribes: `--engine`, else the model's, else `steno serve`'s default.
        var engineName: String {
            if let engine { return engine }
            if let model { return model.hasPrefix("whisper:") ? "whisper" : "pocketsphinx" }
            return ServerOptions().engine
        }
    }

    enum Flags {
        static let format = Flag("format", value: "F", help: "text: one final per line, [start → end] text; jsonl: the wire events; vtt, srt: captions",
                                 default: Format.text.rawValue)
        static let model = Flag("model", value: "DIR", help: "pocketsphinx model directory, or NAME=DIR[,lm=FILE][,dict=FILE]; whisper:DIR a CTranslate2 Whisper folder",
                                default: "whisper tiny.en; pocketsphinx " + PocketSphinxConfiguration.debianModelDirectory)
        static let engine = Flag("engine", value: "NAME", help: "whisper (the worker of scripts/bootstrap.sh's .venv, as steno serve runs it) or pocketsphinx; "
                                     + "a --model names its own",
                                 default: ServerOptions().engine)
        static let phrases = Flag("phrases", value: "FILE", help: PhraseFile.help)
        static let boost = Flag("boost", value: "B", help: PhraseFile.boostHelp, default: "1")
        static let alternatives = Flag("alternatives", value: "N", help: "jsonl: finals carry up to N alternative texts (0-\(StartRequest.maxAlternatives))",
                                       default: "0")
        static let decoder = Flag("decoder", value: "OPTIONS", help: DecoderFlag.help, default: DecoderFlag.defaultText)
        static let endpointing = Flag("endpointing", value: "MODE", help: EndpointingFlag.help, default: EndpointingFlag.defaultText)
        static let chunkMilliseconds = Flag("chunk-ms", value: "N", help: "audio per message sent to the session, ms", default: "100")
        static let maxUtterance = Flag("max-utterance", value: "SECONDS", help: "force a final after this much continuous speech",
                                       default: "15")
        static let noWords = Flag.toggle("no-words", help: "leave word timings out of jsonl output")
        static let noProgress = Flag.toggle("no-progress", help: "no progress bar on stderr")
        static let text = Flag("text", value: "T", help: TextFormat.flagHelp, default: TextFormat.readable.rawValue)
    }

    static let spec = CommandSpec(
        command: "steno transcribe", arguments: "FILE", maxArguments: 1,
        summary: """
            Transcribes a WAV file (PCM 8-32 bit or float, mono or stereo, 8-48 kHz) through the
            same session pipeline as the server, and prints its finals.
            """,
        flags: [Flags.format, Flags.engine, Flags.model, Flags.phrases, Flags.boost, Flags.alternatives, Flags.chunkMilliseconds, Flags.maxUtterance, Flags.decoder, Flags.endpointing,
                Flags.noWords, Flags.noProgress, Flags.text])

    /// The options, or nil when the help text was asked for.
    static func parse(_ arguments: [String]) throws(UsageError) -> Options? {
        let given = try spec.parse(arguments)
        if given.helpRequested { return nil }
        var options = Options()
        if let value = given.single(Flags.format) {
            options.format = Format(rawValue: try given.choice(value, Format.allCases.map(\.rawValue)))!
        }
        if let value = given.single(Flags.model) { options.model = try given.path(value) }
        if let value = given.single(Flags.engine) { options.engine = try given.choice(value, ["whisper", "pocketsphinx"]) }
        if let value = given.single(Flags.phrases) { options.phrasesFile = try given.path(value) }
        options.boost = try PhraseFile.boost(given, Flags.boost, phrases: Flags.phrases)
        if let value = given.single(Flags.alternatives) {
            options.alternatives = try given.integer(value, in: 0...StartRequest.maxAlternatives)
        }
        if let value = given.single(Flags.chunkMilliseconds) {
            options.chunkMilliseconds = try given.integer(value, in: 1...10_000)
        }
        if let value = given.single(Flags.maxUtterance) {
            options.maxUtterance = try given.seconds(value, in: 0.001...86400)
        }
        if let value = given.single(Flags.decoder) { options.decoderArguments = try given.decoderArguments(value) }
        if let value = given.single(Flags.endpointing) { options.endpointing = try given.endpointing(value) }
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
                StandardStreams.stdout(spec.helpText())
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

    static func transcribe(_ file: String, _ options: Options, phrases: [String] = []) throws(StenoError) -> Int32 {
        let wav = try WAVFile(path: file)
        let format = try wav.wireFormat()
        guard wav.frameCount > 0 else { throw StenoError(.badAudio, "the file holds no audio") }

        var base = PocketSphinxConfiguration(arguments: DecoderFlag.arguments(adding: options.decoderArguments),
                                             maxUtteranceSeconds: options.maxUtterance)
        if let endpointing = options.endpointing { base.endpointing = endpointing }
        // `--model whisper:DIR` is Whisper's; pocketsphinx's default model serves beside it (and its
        // detector, where Silero's is not installed).
        let whisperModel = options.model.flatMap { $0.hasPrefix("whisper:") ? String($0.dropFirst("whisper:".count)) : nil }
        let pocketsphinxModel = whisperModel == nil ? options.model ?? PocketSphinxConfiguration.debianModelDirectory
                                                    : PocketSphinxConfiguration.debianModelDirectory
        let pocketsphinx = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(modelSpec: pocketsphinxModel, base: base))
        var engine: any SpeechEngine = pocketsphinx
        if options.engineName == "whisper" || whisperModel != nil {
            let machine = MachineDefaults.detect()
            var settings = ServeOptions.defaults(machine).whisper
            settings.model = whisperModel
            let log = Log(minimum: .warning)
            engine = WhisperEngine(worker: try Serve.startWhisper(settings, log: log), model: settings.servedName,
                                   detection: Serve.speechDetection(settings, energy: pocketsphinx, log: log))
        }
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
        case .vtt: StandardStreams.stdout(Captions.webVTT(session.finals))
        case .srt: StandardStreams.stdout(Captions.srt(session.finals))
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
