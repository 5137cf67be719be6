import StenoCore
import StenoSpeech
import StenoSystem

/// The Whisper engine: one supervised worker for every session, and each session's own
/// speech detector (`SpeechDetection`: Silero VAD, or pocketsphinx's energy detector).
public final class WhisperEngine: SpeechEngine, Sendable {
    public let info: SpeechEngineInfo
    public let worker: WhisperWorker
    /// How its sessions find their utterances.
    public let detection: SpeechDetection

    /// Whisper's codes of the languages the model has (its hello's, or its folder's for a worker
    /// not started yet; "en" alone for an English model).
    public let languages: [String]
    /// The model's folder, when named (a worker started on demand has said nothing yet).
    let folder: String?

    /// A multilingual model says so in its language (`LanguageTag.multilingual`), an English one "en-US".
    /// `version`: what a worker not started yet would say (another's of the same environment).
    public init(worker: WhisperWorker, model: String = "whisper-tiny.en", folder: String? = nil, version known: String? = nil,
                detection: SpeechDetection) {
        self.worker = worker
        self.detection = detection
        self.folder = folder
        var version = "ctranslate2"
        var languages = ["en"]
        var multilingual = false
        if case .object(let hello)? = worker.hello {
            if case .string(let v)? = hello["ctranslate2"] { version += " " + v }
            if case .bool(true)? = hello["multilingual"] { multilingual = true }
            if multilingual, case .array(let codes)? = hello["languages"] {
                languages = codes.compactMap { if case .string(let code) = $0 { code } else { nil } }
            }
        } else {
            version = known ?? version
            if let folder, let codes = WhisperModelFolder.languages(at: folder), codes.count > 1 {
                multilingual = true
                languages = codes
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
        } else if let folder {
            sources.append(.init(name: "model", path: folder))
        }
        return [SpeechModelInfo(info: info, sources: sources,
                                languages: languages.compactMap(WhisperRecognizer.languageTag(whisperCode:)))]
    }

    /// Ready while a worker has its model loaded (not while one restarts), or while one started
    /// on demand waits for its first request (which starts it).
    public var isReady: Bool { worker.isReady || !worker.isStarted }

    public var workerStats: EngineWorkerStats? {
        EngineWorkerStats(ready: isReady, restarts: worker.restarts, pending: worker.pendingCount,
                          cpuSeconds: ProcessCPU.seconds(of: worker.processID))
    }

    /// A recognizer for a session; a multilingual model hears its utterances in the session's
    /// `language` (an English model hears English whatever it is told).
    public func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer {
        let detection = detection
        return try WhisperRecognizer(worker: worker, info: info, options: options,
                                     makeDetector: { () throws(StenoError) in
                                         try detection.makeDetector(postSpeech: WhisperRecognizer.pauseAfter)
                                     },
                                     wake: wake)
    }
}
