import StenoCore
import StenoSpeech
import StenoSystem

/// The Whisper engine: one supervised worker for every session, and each session's own
/// speech detector (made by the pocketsphinx engine served beside it: no model is loaded for it).
public final class WhisperEngine: SpeechEngine, Sendable {
    public let info: SpeechEngineInfo
    public let worker: WhisperWorker
    private let detectors: PocketSphinxEngine

    /// Whisper's codes of the languages the model has (its hello's; "en" alone for an English model).
    public let languages: [String]

    /// A multilingual model says so in its language (`LanguageTag.multilingual`), an English one "en-US".
    public init(worker: WhisperWorker, model: String = "whisper-tiny.en", detectors: PocketSphinxEngine) {
        self.worker = worker
        self.detectors = detectors
        var version = "ctranslate2"
        var languages = ["en"]
        var multilingual = false
        if case .object(let hello)? = worker.hello {
            if case .string(let v)? = hello["ctranslate2"] { version += " " + v }
            if case .bool(true)? = hello["multilingual"] { multilingual = true }
            if multilingual, case .array(let codes)? = hello["languages"] {
                languages = codes.compactMap { if case .string(let code) = $0 { code } else { nil } }
            }
        }
        self.languages = languages
        self.info = SpeechEngineInfo(name: "whisper", version: version, model: model,
                                     language: multilingual ? LanguageTag.multilingual : "en-US",
                                     sampleRate: WhisperRecognizer.sampleRate)
    }

    public var models: [SpeechModelInfo] {
        var sources: [SpeechModelInfo.Source] = []
        if case .object(let hello)? = worker.hello, case .string(let path)? = hello["path"] {
            sources.append(.init(name: "model", path: path))
        }
        return [SpeechModelInfo(info: info, sources: sources)]
    }

    /// Ready while a worker has its model loaded (not while one restarts).
    public var isReady: Bool { worker.isReady }

    public var workerStats: EngineWorkerStats? {
        EngineWorkerStats(ready: worker.isReady, restarts: worker.restarts, pending: worker.pendingCount,
                          cpuSeconds: ProcessCPU.seconds(of: worker.processID))
    }

    /// A recognizer for a session; a multilingual model hears its utterances in the session's
    /// `language` (an English model hears English whatever it is told).
    /// Seconds each session's detector hears first for its noise estimate alone: a quiet room
    /// would otherwise start every session with half a second of "speech", sent to the worker
    /// and counted by admission as a talker (`PocketSphinxSpeechDetector`).
    static let settling = 0.64
    /// Blocks below this (dBFS RMS) heard while no speech is open are passed over by the
    /// detector: a quiet session then costs almost nothing (the detector's front end was ≈1 ms
    /// of CPU per second of a quiet room's audio, the most of a quiet crowd's cost). Speech is
    /// far above it (−20 to −35 dBFS; a soft voice at a distance −45).
    static let quietBelow = -50.0

    public func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer {
        let detectors = detectors
        return try WhisperRecognizer(worker: worker, info: info, options: options,
                                     makeDetector: { () throws(StenoError) in
                                         try detectors.makeSpeechDetector(settling: Self.settling, quietBelow: Self.quietBelow,
                                                                          postSpeech: WhisperRecognizer.pauseAfter)
                                     },
                                     wake: wake)
    }
}
