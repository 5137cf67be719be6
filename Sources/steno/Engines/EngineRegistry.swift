import StenoCore
import StenoServer
import StenoSpeech
import StenoSystem

/// The engines the command line knows, in the order `--engine` lists them. `--engine`'s
/// choices, `--model`'s specs, the engines' flags in `steno serve`'s table and in `steno
/// transcribe`'s, their part of `--help`, and the one `load` of both commands come from here.
struct EngineRegistry: Sendable {
    let providers: [any EngineProvider]

    /// Steno's engines: Whisper (the default, `ServerOptions.engine`) and pocketsphinx.
    static let standard = EngineRegistry([WhisperProvider(), PocketSphinxProvider()])

    init(_ providers: [any EngineProvider]) {
        self.providers = providers
    }

    var names: [String] { providers.map(\.name) }

    /// The engine a `--model` spec is for (the one whose prefix it has, else the one of plain
    /// specs), with the spec without its prefix; nil: none.
    func owner(ofModel spec: String) -> (provider: any EngineProvider, spec: String)? {
        for provider in providers {
            if case .prefixed(let prefix) = provider.modelSpecs, spec.hasPrefix(prefix) {
                return (provider, String(spec.dropFirst(prefix.count)))
            }
        }
        return providers.first { $0.modelSpecs == .plain }.map { ($0, spec) }
    }

    /// The engines' defaults on `machine`, and the other settings' for its hardware.
    func defaults(_ machine: MachineDefaults) -> ServerOptions {
        var options = ServerOptions(hardware: machine.hardware)
        for provider in providers { provider.setDefaults(&options, machine: machine) }
        return options
    }

    // MARK: Flags

    /// `steno serve --engine`.
    func engineRow(_ defaults: ServerOptions) -> ServeFlag {
        ServeFlag(Flag("engine", value: "NAME",
                       help: "engine of sessions that name no model: " + Self.listed(providers.map { $0.help(defaults).serveEngine }),
                       default: defaults.engine, environment: "STENO_ENGINE"),
                  \.engine, .choice(names))
    }

    /// `steno serve --model`: any engine's specs, repeatable (`readModels`).
    func modelRow(_ defaults: ServerOptions) -> ServeFlag {
        let models = plainFirst
        let own = models.map { $0.modelSpecs == .plain ? $0.help(defaults).ownModel : "\($0.name) \($0.help(defaults).ownModel)" }
        return ServeFlag(Flag("model", value: "PATH",
                              help: (models.compactMap { $0.help(defaults).serveModels } + ["repeatable"]).joined(separator: "; "),
                              default: own.joined(separator: ", "), environment: "STENO_MODEL"),
                         read: readModels)
    }

    /// `steno transcribe --engine`.
    func transcribeEngineFlag(_ defaults: ServerOptions) -> Flag {
        Flag("engine", value: "NAME",
             help: Self.listed(providers.map { $0.help(defaults).transcribeEngine }) + "; a --model names its own",
             default: defaults.engine)
    }

    /// `steno transcribe --model`: one spec of any engine.
    func transcribeModelFlag(_ defaults: ServerOptions) -> Flag {
        Flag("model", value: "DIR", help: plainFirst.compactMap { $0.help(defaults).transcribeModels }.joined(separator: "; "),
             default: withModels.map { "\($0.name) \($0.help(defaults).ownModel)" }.joined(separator: "; "))
    }

    /// `steno transcribe`'s rows of the engines' own flags.
    func transcribeRows(_ defaults: ServerOptions) -> [ServeFlag] {
        providers.flatMap { $0.transcribeFlags(defaults) }
    }

    /// `steno serve`'s table: `general`'s rows, each engine's after the one it follows
    /// (`serveFlagsFollow`), or at the end.
    func table(_ general: [ServeFlag], defaults: ServerOptions) -> [ServeFlag] {
        var rows: [ServeFlag] = []
        for row in general {
            rows.append(row)
            for provider in providers where provider.serveFlagsFollow == row.flag.name { rows += provider.serveFlags(defaults) }
        }
        let placed = Set(general.map(\.flag.name))
        for provider in providers where !placed.contains(provider.serveFlagsFollow ?? "") { rows += provider.serveFlags(defaults) }
        return rows
    }

    /// `--model`: each spec to its engine, in the order given.
    func readModels(_ given: ParsedCommandLine, _ flag: Flag, _ options: inout ServerOptions) throws(UsageError) {
        var values: [FlagValue] = []
        if given.wasGiven(flag), case let list = given.list(flag), list.count > 1 {
            values = list  // several models, one per flag (STENO_MODEL holds one: a model's spec has commas)
        } else if let value = given.single(flag) {
            values = [value]
        }
        try read(models: values, given, into: &options)
    }

    /// Model specs given (`--model`), each to the engine it is for.
    func read(models values: [FlagValue], _ given: ParsedCommandLine, into options: inout ServerOptions) throws(UsageError) {
        var specs: [String: [ModelSpec]] = [:]
        for value in values {
            let spec = try given.path(value)
            guard let owner = owner(ofModel: spec) else {
                throw given.error(.invalidValue(source: value.source, value: value.text, expected: "a model of " + Self.listed(names)))
            }
            specs[owner.provider.name, default: []].append(ModelSpec(text: owner.spec, given: value))
        }
        for provider in providers {
            if let theirs = specs[provider.name] { try provider.readModels(theirs, given, into: &options) }
        }
    }

    // MARK: Loading

    /// The engines `options` serve, loaded (blocking): the default engine's first (the first of
    /// its models is the default of sessions that name none), then those of the other engines
    /// served, in the registry's order; several make one `ModelSet`. `steno serve` serves it and
    /// `steno transcribe` runs its file on it.
    func load(_ options: ServerOptions, log: Log = Log()) throws(StenoError) -> any SpeechEngine {
        let loading = EngineLoading(options: options, log: log)
        let served = providers.filter { $0.isServed(options) }
        var engines: [any SpeechEngine] = []
        for provider in served.filter({ $0.name == options.engine }) + served.filter({ $0.name != options.engine }) {
            engines += try loading.engines(of: provider)
        }
        guard engines.count > 1 else {
            guard let engine = engines.first else { throw StenoError(.internal, "no engine serves \(options.engine)") }
            return engine
        }
        if let problem = ModelSet.check(names: engines.flatMap(\.models).map(\.info.model)) {
            throw StenoError(.internal, problem)
        }
        return ModelSet(engines, capacity: loading.sharedCapacity)
    }

    // MARK: Help

    /// The engines that take `--model` specs.
    private var withModels: [any EngineProvider] { providers.filter { $0.modelSpecs != .none } }

    /// The same, the one of plain specs first: as `--model`'s help lists them.
    private var plainFirst: [any EngineProvider] {
        withModels.filter { $0.modelSpecs == .plain } + withModels.filter { $0.modelSpecs != .plain }
    }

    /// "a", "a or b", "a, b or c".
    static func listed(_ items: [String]) -> String {
        guard let last = items.last, items.count > 1 else { return items.joined() }
        return items.dropLast().joined(separator: ", ") + " or " + last
    }
}
