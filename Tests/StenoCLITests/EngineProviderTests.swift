import StenoAudio
import StenoCore
import StenoServer
import StenoSession
import StenoSpeech
import Testing
@testable import steno

/// A new engine through the seam: a provider and its registration, nothing else. The engine
/// hears "hello" in every utterance; `--engine hello` chooses it in `steno serve`'s and `steno
/// transcribe`'s command lines, their one `load` serves it first with pocketsphinx beside it,
/// and a session on what was loaded hears it.
@Suite struct EngineProviderTests {
    /// Hears "hello" in whatever it is given: one final for each utterance (the audio between
    /// two finalizes), at once.
    final class HelloRecognizer: SpeechRecognizer {
        let info: SpeechEngineInfo
        private var samples = 0
        /// Where the utterance in progress began; nil: none is.
        private var start: Int?

        init(info: SpeechEngineInfo) {
            self.info = info
        }

        var sampleRate: Int { info.sampleRate }
        var analyzedSeconds: Double { seconds(samples) }
        var isWaiting: Bool { false }

        func accept(_ buffer: UnsafeBufferPointer<Float>) throws(StenoError) -> [TranscriberEvent] {
            guard !buffer.isEmpty else { return [] }
            defer { samples += buffer.count }
            guard start == nil else { return [] }
            start = samples
            return [.speechStarted(at: seconds(samples))]
        }

        func endUtterance() throws(StenoError) -> [TranscriberEvent] { hello() }
        func finish() throws(StenoError) -> [TranscriberEvent] { hello() }
        func cancel() { start = nil }
        func proceed() throws(StenoError) -> [TranscriberEvent] { [] }

        func skipSilence(_ count: Int) throws(StenoError) -> [TranscriberEvent] {
            defer { samples += count }
            return hello()
        }

        private func hello() -> [TranscriberEvent] {
            guard let start else { return [] }
            self.start = nil
            let range = TimeRange(start: seconds(start), end: analyzedSeconds)
            return [.speechEnded(at: range.end),
                    .final(RecognitionResult(range: range, text: "hello", words: [Word("hello", range: range, confidence: 1)]))]
        }

        private func seconds(_ count: Int) -> Double { Double(count) / Double(sampleRate) }
    }

    struct HelloEngine: SpeechEngine {
        let info = SpeechEngineInfo(name: "hello", version: "1", model: "greeting", language: "en-US", sampleRate: 16_000)
        /// The worker process it says it has, for `/metrics`.
        static let worker = EngineWorkerStats(ready: true, restarts: 2, pending: 1, cpuSeconds: 0.5)
        var workerStats: EngineWorkerStats? { Self.worker }

        func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer {
            HelloRecognizer(info: info)
        }
    }

    struct HelloProvider: EngineProvider {
        let name = "hello"
        let modelSpecs = ModelSpecs.none

        func help(_ defaults: ServerOptions) -> EngineHelp {
            EngineHelp(serveEngine: "hello (pocketsphinx beside it)", transcribeEngine: "hello (a greeting)", ownModel: "greeting")
        }

        func load(_ loading: EngineLoading) throws(StenoError) -> [any SpeechEngine] { [HelloEngine()] }
    }

    /// Steno's engines and this one.
    static let engines = EngineRegistry(EngineRegistry.standard.providers + [HelloProvider()])

    /// What a session on `engine` finalizes from a second of sound.
    static func finals(_ engine: any SpeechEngine) throws -> [String] {
        let wav = WAVFile(sampleRate: 16_000, channels: 1, samples: (0..<16_000).map { Float(($0 % 40) - 20) / 40 })
        let session = LocalSession(engine: engine)
        session.start(format: try wav.wireFormat(), text: .raw)
        session.send(audio: wav.f32leBytes)
        session.end()
        #expect(session.closeCode == 1000, "\(session.events.map(\.text))")
        return session.finals.map(\.text)
    }

    @Test func bothCommandsOfferIt() throws {
        let serve = ServeOptions.spec(machine, engines: Self.engines).helpText()
        #expect(serve.contains("engine of sessions that name no model: whisper (pocketsphinx beside it), pocketsphinx (alone) "
                               + "or hello (pocketsphinx beside it)"))
        #expect(ServeOptions.spec(machine).helpText() == ServeOptions.spec(machine, engines: .standard).helpText())
        #expect(!ServeOptions.spec(machine).helpText().contains("hello"))
        let transcribe = Transcribe.spec(Self.engines, ServerOptions()).helpText()
        #expect(transcribe.contains("or hello (a greeting); a --model names its own"))
        do {
            _ = try ServeOptions.parse(["--engine", "vosk"], environment: [:], machine: machine, engines: Self.engines)
            Issue.record("vosk is no engine")
        } catch {
            #expect(error.problem == .invalidValue(source: "--engine", value: "vosk", expected: "one of whisper, pocketsphinx, hello"))
        }
        #expect(problem(["--engine", "hello"]) != nil, "the standard registry has no hello")
    }

    /// `steno serve --engine hello`: hello first, pocketsphinx beside it, no Whisper worker; its
    /// worker in `/metrics`; a session that names no model hears hello.
    @Test func serveLoadsItFirstWithPocketsphinxBesideIt() throws {
        let options = try #require(try ServeOptions.parse(["--engine", "hello"], environment: [:], machine: .detect(),
                                                          engines: Self.engines))
        #expect(options.engine == "hello")
        let engine = try Self.engines.load(options, log: .silent)
        #expect(engine.models.map(\.info.name) == ["hello", "pocketsphinx"])
        #expect(engine.workerStats == HelloEngine.worker)
        #expect(try Self.finals(engine) == ["hello"])
    }

    /// `steno transcribe --engine hello FILE` loads it the same way.
    @Test func transcribeLoadsItTheSameWay() throws {
        let options = try #require(try Transcribe.parse(["--engine", "hello", "speech.wav"], engines: Self.engines))
        #expect(options.settings.engine == "hello" && options.file == "speech.wav")
        let engine = try Self.engines.load(options.settings, log: .silent)
        #expect(engine.info.name == "hello")
        #expect(try Self.finals(engine) == ["hello"])
    }
}
