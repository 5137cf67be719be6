import StenoCore
import StenoServer
import StenoSpeech
import StenoSystem

/// One speech engine as the command line knows it: its name (`--engine`), its flags (rows of
/// `steno serve`'s table and of `steno transcribe`'s), the `--model` specs it takes, its
/// defaults on this machine, and how its engines are made from the settings. `EngineRegistry`
/// holds one per engine, and everything engine-specific of `serve` and `transcribe` comes from
/// there: a new engine is a provider and a line in `EngineRegistry.standard`.
///
/// Its settings are `ServerOptions`' (plain values that StenoServer keeps and never reads: it
/// is handed the engine loaded from them).
protocol EngineProvider: Sendable {
    /// What `--engine` calls it (`ServerOptions.engine`).
    var name: String { get }
    /// The `--model` specs that are its.
    var modelSpecs: ModelSpecs { get }
    /// What `--help` says of it, with `defaults` (this machine's).
    func help(_ defaults: ServerOptions) -> EngineHelp
    /// Its rows of `steno serve`'s table of flags, with `defaults` in their help; none by default.
    func serveFlags(_ defaults: ServerOptions) -> [ServeFlag]
    /// The row of the table its rows follow (in `--help` and in parsing); nil: the end.
    var serveFlagsFollow: String? { get }
    /// Its rows of `steno transcribe`'s flags, read into the settings transcribe loads with
    /// (`defaults`: transcribe's); none by default.
    func transcribeFlags(_ defaults: ServerOptions) -> [ServeFlag]
    /// Its defaults that depend on `machine` (where its programs and models are).
    func setDefaults(_ options: inout ServerOptions, machine: MachineDefaults)
    /// Reads the `--model` specs that are its, in the order given (called only when there are some).
    func readModels(_ specs: [ModelSpec], _ given: ParsedCommandLine, into options: inout ServerOptions) throws(UsageError)
    /// Whether the settings serve it; by default when it is the default engine (`--engine`).
    func isServed(_ options: ServerOptions) -> Bool
    /// Its engines, loaded (blocking), its default model first. `loading` has the settings and the
    /// log, and the engines of another provider it needs.
    func load(_ loading: EngineLoading) throws(StenoError) -> [any SpeechEngine]
}

extension EngineProvider {
    func serveFlags(_ defaults: ServerOptions) -> [ServeFlag] { [] }
    var serveFlagsFollow: String? { nil }
    func transcribeFlags(_ defaults: ServerOptions) -> [ServeFlag] { [] }
    func setDefaults(_ options: inout ServerOptions, machine: MachineDefaults) {}
    func readModels(_ specs: [ModelSpec], _ given: ParsedCommandLine, into options: inout ServerOptions) throws(UsageError) {}
    func isServed(_ options: ServerOptions) -> Bool { options.engine == name }
}

/// Which `--model` specs are an engine's.
enum ModelSpecs: Sendable, Equatable {
    /// None: it has its own model only.
    case none
    /// Those that start with this, as `whisper:DIR`.
    case prefixed(String)
    /// Those that no engine's prefix claims: plain `DIR` (one engine's, pocketsphinx's).
    case plain
}

/// One `--model` spec an engine took.
struct ModelSpec: Sendable, Equatable {
    /// The spec, without the engine's prefix.
    var text: String
    /// As given, for what an error says.
    var given: FlagValue
}

/// What `--help` says of an engine.
struct EngineHelp: Sendable {
    /// `steno serve --engine`: its name and what is served beside it.
    var serveEngine: String
    /// `steno transcribe --engine`.
    var transcribeEngine: String
    /// The model it has when no `--model` names one.
    var ownModel: String
    /// How `steno serve --model` and `steno transcribe --model` write its specs; nil: it takes none.
    var serveModels: String?
    var transcribeModels: String?
}

/// One load of the registry's engines: the settings, the log, each provider's engines once
/// made (another provider may need them), and the decoders' budget they share. Used on the
/// thread that loads, and dropped after.
final class EngineLoading {
    let options: ServerOptions
    let log: Log
    /// The total of the budgets that engines share (`ModelSet`'s capacity); nil: none shared.
    private(set) var sharedCapacity: Int?
    private var made: [String: [any SpeechEngine]] = [:]

    init(options: ServerOptions, log: Log) {
        self.options = options
        self.log = log
    }

    /// `provider`'s engines: those made already in this load, or loaded now.
    func engines(of provider: any EngineProvider) throws(StenoError) -> [any SpeechEngine] {
        if let engines = made[provider.name] { return engines }
        let engines = try provider.load(self)
        made[provider.name] = engines
        return engines
    }

    /// Engines of a provider share a budget of `capacity` decoders.
    func share(capacity: Int) {
        sharedCapacity = (sharedCapacity ?? 0) + capacity
    }
}
