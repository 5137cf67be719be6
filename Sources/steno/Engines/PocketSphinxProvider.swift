import StenoCore
import StenoServer
import StenoSpeech
import StenoSystem

/// The pocketsphinx engine: one per plain `--model` (the first is its default; several share
/// `--recognizers` decoders), always served: alone, or beside another default engine, to which
/// it lends its energy detector (Whisper). `--decoder` and `--endpointing` apply to all its
/// models, and `steno transcribe --max-utterance`.
struct PocketSphinxProvider: EngineProvider {
    let name = "pocketsphinx"
    let modelSpecs = ModelSpecs.plain

    func help(_ defaults: ServerOptions) -> EngineHelp {
        EngineHelp(serveEngine: "pocketsphinx (alone)", transcribeEngine: "pocketsphinx", ownModel: defaults.modelPath,
                   serveModels: "pocketsphinx model: DIR or NAME=DIR[,lm=FILE][,dict=FILE]",
                   transcribeModels: "pocketsphinx model directory, or NAME=DIR[,lm=FILE][,dict=FILE]")
    }

    var serveFlagsFollow: String? { "audio-batch-seconds" }

    func serveFlags(_ defaults: ServerOptions) -> [ServeFlag] {
        searchFlags(defaults, variables: true)
    }

    func transcribeFlags(_ defaults: ServerOptions) -> [ServeFlag] {
        [ServeFlag(Flag("max-utterance", value: "SECONDS", help: "force a final after this much continuous speech",
                        default: JSONWriter.secondsText(defaults.maxUtteranceSeconds)),
                   \.maxUtteranceSeconds, .seconds(0.001...86400))]
            + searchFlags(defaults, variables: false)
    }

    /// `--decoder` and `--endpointing`, with their `STENO_*` variables when `variables`.
    private func searchFlags(_ defaults: ServerOptions, variables: Bool) -> [ServeFlag] {
        [
            ServeFlag(Flag("decoder", value: "OPTIONS", help: DecoderFlag.help, default: DecoderFlag.defaultText,
                           environment: variables ? "STENO_DECODER" : nil),
                      \.decoderArguments, .decoderArguments),
            ServeFlag(Flag("endpointing", value: "MODE", help: EndpointingFlag.help,
                           default: defaults.endpointing.map(EndpointingFlag.text) ?? EndpointingFlag.defaultText,
                           environment: variables ? "STENO_ENDPOINTING" : nil),
                      \.endpointing, .endpointing),
        ]
    }

    /// Debian's model.
    func setDefaults(_ options: inout ServerOptions, machine: MachineDefaults) {
        options.modelPath = machine.modelPath
    }

    /// The first is the default model; several are `models`.
    func readModels(_ specs: [ModelSpec], _ given: ParsedCommandLine, into options: inout ServerOptions) throws(UsageError) {
        options.modelPath = specs[0].text
        options.models = specs.count > 1 ? specs.map(\.text) : []
    }

    func isServed(_ options: ServerOptions) -> Bool { true }

    func load(_ loading: EngineLoading) throws(StenoError) -> [any SpeechEngine] {
        let options = loading.options
        if options.logLevel >= .trace {
            try? PocketSphinxEngine.setLogFile("/dev/stderr")
        }
        let configurations = try Self.configurations(options)
        let budget = configurations.count > 1 ? DecoderBudget(total: options.recognizers) : nil
        if let budget { loading.share(capacity: budget.total) }
        return try configurations.map { (configuration) throws(StenoError) in
            try PocketSphinxEngine(configuration: configuration, budget: budget)
        }
    }

    /// Each model's configuration, with the options every model shares (`--decoder`,
    /// `--endpointing`, `--recognizers`, `--max-utterance`); nothing is loaded.
    static func configurations(_ options: ServerOptions) throws(StenoError) -> [PocketSphinxConfiguration] {
        let specs = options.models.isEmpty ? [options.modelPath] : options.models
        var base = PocketSphinxConfiguration(arguments: DecoderFlag.arguments(adding: options.decoderArguments),
                                             maxUtteranceSeconds: options.maxUtteranceSeconds, recognizers: options.recognizers)
        if let endpointing = options.endpointing { base.endpointing = endpointing }
        return try specs.map { (spec) throws(StenoError) in try PocketSphinxConfiguration(modelSpec: spec, base: base) }
    }
}
