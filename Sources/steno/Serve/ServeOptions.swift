import StenoServer

/// `steno serve`'s command line: every server option as a flag and a `STENO_*` variable,
/// parsed into the plain `ServerOptions`. The flags are one table (`Flags`,
/// ServeOptions+Flags.swift): each entry's flag gives `--help`, the parsing and the
/// variable, and its `read` puts the value into the options.
///
/// The engines' rows, `--engine` and `--model` come from the `EngineRegistry` (the standard
/// one unless told another).
///
/// Parsing is pure: it reads only its arguments, the environment and the
/// ``MachineDefaults`` it is given, and checks values without touching the file system
/// (whether the model and web root exist is for the server to find out at start).
struct ServeOptions {
    static func spec(_ machine: MachineDefaults, engines: EngineRegistry = .standard) -> CommandSpec {
        spec(Flags(machine, engines: engines))
    }

    private static func spec(_ flags: Flags) -> CommandSpec {
        CommandSpec(
            command: "steno serve",
            summary: """
                Serves live captions over WebSocket (/v1/stream, /v1/listen), the web client (/),
                /healthz and /metrics. Every option can also be set by the environment variable
                shown; the command line wins. Times are in seconds.
                """,
            flags: flags.all)
    }

    /// The options when nothing is given, on `machine`.
    static func defaults(_ machine: MachineDefaults, engines: EngineRegistry = .standard) -> ServerOptions {
        var options = engines.defaults(machine)
        options.webRoot = machine.webRoot
        options.endpointing = EndpointingFlag.serverDefault
        return options
    }

    /// The parsed command line, or nil when it asked for the help text.
    static func parse(_ arguments: [String], environment: [String: String],
                      machine: MachineDefaults, engines: EngineRegistry = .standard) throws(UsageError) -> ServerOptions? {
        let flags = Flags(machine, engines: engines)
        let given = try spec(flags).parse(arguments, environment: environment)
        if given.helpRequested { return nil }
        var options = defaults(machine, engines: engines)
        for entry in flags.entries { try entry.read(given, entry.flag, &options) }
        return options
    }
}
