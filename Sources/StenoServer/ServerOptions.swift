import StenoCore
import StenoSystem
import Foundation

/// The options of `steno serve`, from command-line flags and environment variables.
///
/// Every option has a flag and an environment variable (`--max-sessions` and
/// `STENO_MAX_SESSIONS`); a flag given on the command line wins over the variable.
/// Flags take their value as `--port 9000` or `--port=9000`; a non-repeatable flag given
/// twice takes the last value. `--token` and `--allowed-origin` are repeatable; their
/// variables `STENO_TOKENS` and `STENO_ALLOWED_ORIGINS` hold comma-separated lists, and
/// are ignored entirely when the flag is given at least once. An empty variable counts as
/// unset; values of variables are trimmed of surrounding white space.
///
/// Parsing is pure: it reads only its arguments and the ``Defaults`` it is given, and
/// checks values without touching the file system (whether the model and web root exist
/// is for the server to check at start).
public struct ServerOptions: Sendable, Equatable {
    /// A certificate and its private key, both PEM files.
    public struct TLS: Sendable, Equatable {
        public var certificatePath: String
        public var privateKeyPath: String

        public init(certificatePath: String, privateKeyPath: String) {
            self.certificatePath = certificatePath
            self.privateKeyPath = privateKeyPath
        }
    }

    /// Address to listen on.
    public var host: String
    /// TCP port; 0 asks the system for any free port.
    public var port: Int
    /// The pocketsphinx model directory (holding `en-us/`, `en-us.lm.bin` and
    /// `cmudict-en-us.dict` in the Debian layout).
    public var modelPath: String
    /// The folder served at `/`.
    public var webRoot: String
    /// Most transcription sessions at once; more are refused with HTTP 503.
    public var maxSessions: Int
    /// Largest WebSocket message accepted, in bytes (`too_large` beyond).
    public var maxFrameBytes: Int
    /// Audio received but not yet analyzed that a session may hold, in seconds of audio.
    public var bufferSeconds: Double
    /// Unsent events a connection may hold, in bytes (`slow_consumer` beyond).
    public var outboundBytes: Int
    /// A session with no audio and no message for this long is closed (`idle`);
    /// nil: never.
    public var idleTimeout: Duration?
    /// A session is finalized and closed (`session_limit`) after this long; nil: no limit.
    public var maxSessionDuration: Duration?
    /// Accepted bearer tokens; empty: no authentication.
    public var tokens: [String]
    /// Tokens that may only follow channels (`/v1/listen`, the caption files), for links
    /// handed to an audience; they need `tokens` (publishing stays token-only).
    public var viewerTokens: [String]
    /// Accepted `Origin` values of WebSocket handshakes, lowercased; empty: any origin.
    public var allowedOrigins: [String]
    /// TLS certificate and key; nil: plain HTTP and WebSocket.
    public var tls: TLS?
    /// How long a shutdown waits for sessions to finalize before closing them anyway.
    public var drainTimeout: Duration
    /// Each WebSocket is pinged this long after it was last heard from (a pong or any
    /// message), and hung up on when silent for twice that plus 10 s; nil: never. This
    /// finds viewers and clients that vanished without closing (a phone that lost its
    /// network), which would otherwise hold their connection for good on a quiet channel.
    public var keepAlive: Duration?
    /// Threads of the worker pool that runs decoding and recognition.
    public var workers: Int
    /// Decoders shared by all sessions: how many utterances are recognized at once (≈95 MB
    /// each). A session borrows one while it speaks.
    public var recognizers: Int = 4
    /// Each session keeps a recognizer from its first utterance to its end, as before they were
    /// shared (for comparison in benchmarks; `recognizers` then limits sessions that spoke).
    public var dedicatedRecognizers = false
    /// The lag (seconds of audio behind real time) a live talker may have before new sessions
    /// are refused for load (see `Admission`); 0: admit by the connection limit alone.
    public var lagTarget: Double = 1
    /// How long a session whose connection dropped waits for its client to resume it, in
    /// seconds; 0: no resume.
    public var resumeSeconds: Double = 30
    /// Log verbosity.
    public var logLevel: LogLevel
    /// `--help` or `-h` was given: print ``helpText(defaults:)`` and exit, nothing else
    /// was checked.
    public var helpRequested: Bool

    /// The options when nothing is given.
    public init(defaults: Defaults = .detect()) {
        host = "127.0.0.1"
        port = 8080
        modelPath = defaults.modelPath
        webRoot = defaults.webRoot
        maxSessions = defaults.maxSessions
        recognizers = defaults.recognizers
        maxFrameBytes = 65536
        bufferSeconds = 10
        outboundBytes = 1 << 20
        idleTimeout = .seconds(30)
        maxSessionDuration = .seconds(4 * 3600)
        tokens = []
        viewerTokens = []
        allowedOrigins = []
        tls = nil
        drainTimeout = .seconds(10)
        keepAlive = .seconds(30)
        workers = defaults.cores
        logLevel = .info
        helpRequested = false
    }

    /// Parses `arguments` (what follows `steno serve`, without the program name) and
    /// `environment` (the `STENO_*` variables; others are ignored).
    public init(
        arguments: [String], environment: [String: String], defaults: Defaults = .detect()
    ) throws(ServerOptionsError) {
        self.init(defaults: defaults)
        if arguments.contains(where: { $0 == "--help" || $0 == "-h" }) {
            helpRequested = true
            return
        }
        let given = try Self.scan(arguments)
        let values = ValueSource(flags: given, environment: environment)

        if let value = values.single(.host) { host = try Self.parseHost(value) }
        if let value = values.single(.port) { port = try Self.parseInteger(value, in: 0...65535) }
        if let value = values.single(.model) { modelPath = try Self.parsePath(value) }
        if let value = values.single(.webRoot) { webRoot = try Self.parsePath(value) }
        if let value = values.single(.maxSessions) {
            maxSessions = try Self.parseInteger(value, in: 1...100_000)
        }
        if let value = values.single(.maxFrameBytes) {
            maxFrameBytes = try Self.parseInteger(value, in: 1024...(16 << 20))
        }
        if let value = values.single(.bufferSeconds) {
            bufferSeconds = try Self.parseSeconds(value, in: 0.1...3600)
        }
        if let value = values.single(.outboundBytes) {
            outboundBytes = try Self.parseInteger(value, in: 4096...(1 << 30))
        }
        if let value = values.single(.idleTimeout) {
            let seconds = try Self.parseSeconds(value, in: 0...86400)
            idleTimeout = seconds == 0 ? nil : .seconds(seconds)
        }
        if let value = values.single(.maxSessionSeconds) {
            let seconds = try Self.parseSeconds(value, in: 0...(30 * 86400))
            maxSessionDuration = seconds == 0 ? nil : .seconds(seconds)
        }
        tokens = try values.list(.token).map { (value) throws(ServerOptionsError) in try Self.parseToken(value) }
        viewerTokens = try values.list(.viewerToken).map { (value) throws(ServerOptionsError) in try Self.parseToken(value) }
        if !viewerTokens.isEmpty && tokens.isEmpty { throw .viewerTokenWithoutToken }
        allowedOrigins = try values.list(.allowedOrigin).map { (value) throws(ServerOptionsError) in
            try Self.parseOrigin(value)
        }
        let certificate = try values.single(.cert).map { (value) throws(ServerOptionsError) in try Self.parsePath(value) }
        let key = try values.single(.key).map { (value) throws(ServerOptionsError) in try Self.parsePath(value) }
        switch (certificate, key) {
        case let (certificate?, key?): tls = TLS(certificatePath: certificate, privateKeyPath: key)
        case (nil, nil): tls = nil
        case (_?, nil): throw .certificateWithoutKey
        case (nil, _?): throw .keyWithoutCertificate
        }
        if let value = values.single(.drainTimeout) {
            drainTimeout = .seconds(try Self.parseSeconds(value, in: 0...3600))
        }
        if let value = values.single(.keepAlive) {
            let seconds = try Self.parseSeconds(value, in: 0...3600)
            keepAlive = seconds == 0 ? nil : .seconds(max(1, seconds.rounded()))
        }
        if let value = values.single(.workers) { workers = try Self.parseInteger(value, in: 1...256) }
        if let value = values.single(.logLevel) { logLevel = try Self.parseLogLevel(value) }
    }

    // MARK: Defaults

    /// What the defaults depend on: the machine and where the program was built.
    public struct Defaults: Sendable, Equatable {
        /// Active processor cores.
        public var cores: Int
        /// Physical memory in bytes.
        public var physicalMemory: UInt64
        /// The model directory of Debian's `pocketsphinx-en-us` package.
        public var modelPath: String
        /// The web client folder (see ``findWebRoot(currentDirectory:executablePath:sourceFile:isDirectory:)``).
        public var webRoot: String

        /// Memory set aside per session: one recognizer (≈95 MB measured) and its buffers.
        public static let bytesPerSession: UInt64 = 100 << 20

        public init(cores: Int, physicalMemory: UInt64, modelPath: String, webRoot: String) {
            self.cores = max(1, cores)
            self.physicalMemory = physicalMemory
            self.modelPath = modelPath
            self.webRoot = webRoot
        }

        /// The default number of shared decoders: four per core (a live talker costs a core
        /// ≈0.2–0.4 s per second of speech, and a decoder is held for a whole utterance while
        /// it waits for the talker), and no more than half the memory holds at ≈100 MB each.
        public var recognizers: Int {
            let byMemory = Int(clamping: physicalMemory / 2 / Self.bytesPerSession)
            return max(2, min(4 * cores, byMemory))
        }

        /// The default connection limit for `/v1/stream`: sessions are light (a front end;
        /// talkers share the recognizers, and load decides admission), so it is set by open
        /// files rather than CPU: each connection is one.
        public var maxSessions: Int { 10_000 }

        /// The defaults of this machine and program (reads the file system only to find
        /// the web root).
        public static func detect() -> Defaults {
            let info = ProcessInfo.processInfo
            let executable = Bundle.main.executableURL?.resolvingSymlinksInPath().path
            let webRoot = findWebRoot(
                currentDirectory: FileManager.default.currentDirectoryPath,
                executablePath: executable,
                sourceFile: #filePath,
                isDirectory: { path in
                    var directory: ObjCBool = false
                    return FileManager.default.fileExists(atPath: path, isDirectory: &directory) && directory.boolValue
                })
            return Defaults(
                cores: info.activeProcessorCount, physicalMemory: info.physicalMemory,
                modelPath: "/usr/share/pocketsphinx/model/en-us", webRoot: webRoot)
        }

        /// Where the web client is when `--web-root` is not given. The first folder named
        /// `web-client` that exists among:
        /// 1. the current directory (`swift run steno serve` from the package, or CI);
        /// 2. the executable's directory and each of its parents (a build under the
        ///    package's `.build/…/debug/`), and `share/steno/web-client` beside an
        ///    installed `bin/steno`;
        /// 3. the package the program was compiled from (found from this source file's
        ///    path at build time: `Sources/StenoServer/` is two levels below the root).
        /// When none exists, `web-client` in the current directory, which the server then
        /// reports as missing.
        public static func findWebRoot(
            currentDirectory: String, executablePath: String?, sourceFile: String,
            isDirectory: (String) -> Bool
        ) -> String {
            var candidates = [join(currentDirectory, "web-client")]
            if let executablePath {
                var directory = parent(of: executablePath)
                for _ in 0..<6 {
                    candidates.append(join(directory, "web-client"))
                    if parent(of: directory) == directory { break }
                    directory = parent(of: directory)
                }
                let prefix = parent(of: parent(of: executablePath))
                candidates.append(join(prefix, "share/steno/web-client"))
            }
            let packageRoot = parent(of: parent(of: parent(of: sourceFile)))
            candidates.append(join(packageRoot, "web-client"))
            return candidates.first(where: isDirectory) ?? candidates[0]
        }

        private static func parent(of path: String) -> String {
            guard let slash = path.lastIndex(of: "/") else { return "." }
            if slash == path.startIndex { return "/" }
            return String(path[..<slash])
        }

        private static func join(_ directory: String, _ name: String) -> String {
            directory.hasSuffix("/") ? directory + name : directory + "/" + name
        }
    }

    // MARK: Help

    /// The `--help` text, with this machine's defaults.
    public static func helpText(defaults: Defaults = .detect()) -> String {
        let options = ServerOptions(defaults: defaults)
        func seconds(_ duration: Duration?) -> String {
            guard let duration else { return "0" }
            return JSONWriter.secondsText(Double(duration.components.seconds))
        }
        var lines = [
            "Usage: steno serve [options]",
            "",
            "Serves live captions over WebSocket (/v1/stream, /v1/listen), the web client (/),",
            "/healthz and /metrics. Every option can also be set by the environment variable",
            "shown; the command line wins. Times are in seconds.",
            "",
        ]
        let rows: [(Option, String, String)] = [
            (.host, "address to listen on", options.host),
            (.port, "TCP port; 0 picks any free port", "\(options.port)"),
            (.model, "pocketsphinx model directory", options.modelPath),
            (.webRoot, "folder served at /", options.webRoot),
            (.maxSessions, "most connected sessions at once (talkers are admitted by load)", "\(options.maxSessions)"),
            (.maxFrameBytes, "largest WebSocket message, bytes", "\(options.maxFrameBytes)"),
            (.bufferSeconds, "audio a session may hold unanalyzed", JSONWriter.secondsText(options.bufferSeconds)),
            (.outboundBytes, "unsent events a connection may hold, bytes", "\(options.outboundBytes)"),
            (.idleTimeout, "close a session silent this long; 0 never", seconds(options.idleTimeout)),
            (.maxSessionSeconds, "longest session; 0 unlimited", seconds(options.maxSessionDuration)),
            (.token, "accepted bearer token; repeatable (env: comma-separated)", "none (no auth)"),
            (.viewerToken, "token that may only follow channels; needs --token; repeatable", "none"),
            (.allowedOrigin, "accepted Origin, e.g. https://example.com; repeatable", "any origin"),
            (.cert, "TLS certificate (PEM); needs --key", "none (plain HTTP)"),
            (.key, "TLS private key (PEM); needs --cert", "none (plain HTTP)"),
            (.drainTimeout, "on shutdown, wait this long for sessions to finalize", seconds(options.drainTimeout)),
            (.keepAlive, "ping WebSockets this often; hang up on ones that do not answer; 0 never", seconds(options.keepAlive)),
            (.workers, "threads for decoding and recognition", "\(options.workers)"),
            (.logLevel, LogLevel.allCases.map(\.rawValue).joined(separator: "|"), options.logLevel.rawValue),
        ]
        let column = 34
        func row(_ flag: String, _ text: String) -> String {
            let flag = "  " + flag
            if flag.count >= column { return flag + "\n" + String(repeating: " ", count: column) + text }
            return flag.padding(toLength: column, withPad: " ", startingAt: 0) + text
        }
        for (option, help, value) in rows {
            lines.append(row("\(option.flag) \(option.valueName)", help))
            lines.append(row("", "default: \(value); env \(option.environmentName)"))
        }
        lines.append(row("-h, --help", "show this text"))
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: Parsing

    /// The options, by flag name.
    enum Option: String, CaseIterable {
        case host, port, model
        case webRoot = "web-root"
        case maxSessions = "max-sessions"
        case maxFrameBytes = "max-frame-bytes"
        case bufferSeconds = "buffer-seconds"
        case outboundBytes = "outbound-bytes"
        case idleTimeout = "idle-timeout"
        case maxSessionSeconds = "max-session-seconds"
        case token
        case viewerToken = "viewer-token"
        case allowedOrigin = "allowed-origin"
        case cert, key
        case drainTimeout = "drain-timeout"
        case keepAlive = "keepalive"
        case workers
        case logLevel = "log-level"

        var flag: String { "--" + rawValue }

        var environmentName: String {
            switch self {
            case .token: return "STENO_TOKENS"
            case .viewerToken: return "STENO_VIEWER_TOKENS"
            case .allowedOrigin: return "STENO_ALLOWED_ORIGINS"
            default: return "STENO_" + rawValue.uppercased().replacingOccurrences(of: "-", with: "_")
            }
        }

        var isRepeatable: Bool { self == .token || self == .viewerToken || self == .allowedOrigin }

        var valueName: String {
            switch self {
            case .host: return "ADDRESS"
            case .port, .maxSessions, .workers: return "N"
            case .model, .webRoot, .cert, .key: return "PATH"
            case .maxFrameBytes, .outboundBytes: return "BYTES"
            case .bufferSeconds, .idleTimeout, .maxSessionSeconds, .drainTimeout, .keepAlive: return "SECONDS"
            case .token, .viewerToken: return "TOKEN"
            case .allowedOrigin: return "ORIGIN"
            case .logLevel: return "LEVEL"
            }
        }
    }

    /// Flag values in the order given.
    private static func scan(_ arguments: [String]) throws(ServerOptionsError) -> [Option: [String]] {
        var given: [Option: [String]] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("-"), argument.count > 1 else {
                throw .unexpectedArgument(argument)
            }
            let name: Substring
            var value: String?
            if let equals = argument.firstIndex(of: "=") {
                name = argument[..<equals]
                value = String(argument[argument.index(after: equals)...])
            } else {
                name = argument[...]
            }
            guard name.hasPrefix("--"), let option = Option(rawValue: String(name.dropFirst(2))) else {
                throw .unknownOption(String(name), suggestion: suggestion(for: String(name)))
            }
            if value == nil {
                // A following flag is not a value: `--port --host x` lacks the port.
                guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                    throw .missingValue(option: option.flag)
                }
                value = arguments[index]
                index += 1
            }
            given[option, default: []].append(value ?? "")
        }
        return given
    }

    /// The closest flag to a misspelt one, if it is close.
    private static func suggestion(for name: String) -> String? {
        let typed = Array(name.drop(while: { $0 == "-" }))
        if typed.count >= 2, "help".hasPrefix(String(typed)) { return "--help" }
        var best: (option: Option, distance: Int)?
        for option in Option.allCases {
            let distance = editDistance(typed, Array(option.rawValue))
            if distance <= 2, distance < best?.distance ?? Int.max { best = (option, distance) }
        }
        return best?.option.flag
    }

    /// Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`.
    private static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        let width = b.count + 1
        var table = Array(repeating: 0, count: (a.count + 1) * width)
        for i in 0...a.count { table[i * width] = i }
        for j in 0...b.count { table[j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var best = min(table[(i - 1) * width + j] + 1, table[i * width + j - 1] + 1,
                               table[(i - 1) * width + j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    best = min(best, table[(i - 2) * width + j - 2] + 1)
                }
                table[i * width + j] = best
            }
        }
        return table[a.count * width + b.count]
    }

    /// Where a value came from, for error messages.
    struct Value {
        var text: String
        var source: String
    }

    private struct ValueSource {
        var flags: [Option: [String]]
        var environment: [String: String]

        /// The flag's last value, else the environment variable's.
        func single(_ option: Option) -> Value? {
            if let last = flags[option]?.last { return Value(text: last, source: option.flag) }
            if let text = environmentValue(option) {
                return Value(text: text, source: "\(option.environmentName) (environment)")
            }
            return nil
        }

        /// All the flag's values, else the variable's comma-separated items.
        func list(_ option: Option) -> [Value] {
            if let values = flags[option] {
                return values.map { Value(text: $0, source: option.flag) }
            }
            guard let text = environmentValue(option) else { return [] }
            return text.split(separator: ",")
                .map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
                .map { Value(text: $0, source: "\(option.environmentName) (environment)") }
        }

        private func environmentValue(_ option: Option) -> String? {
            guard let raw = environment[option.environmentName] else { return nil }
            let trimmed = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            return trimmed.isEmpty ? nil : trimmed
        }
    }

    private static func parseHost(_ value: Value) throws(ServerOptionsError) -> String {
        guard !value.text.isEmpty, !value.text.contains(where: { $0.isWhitespace }) else {
            throw .invalidValue(source: value.source, value: value.text,
                                expected: "a host name or IP address, such as 127.0.0.1 or 0.0.0.0")
        }
        return value.text
    }

    private static func parsePath(_ value: Value) throws(ServerOptionsError) -> String {
        guard !value.text.isEmpty else {
            throw .invalidValue(source: value.source, value: value.text, expected: "a path")
        }
        return value.text
    }

    private static func parseInteger(_ value: Value, in range: ClosedRange<Int>) throws(ServerOptionsError) -> Int {
        let expected = "a whole number from \(range.lowerBound) to \(range.upperBound)"
        let text = value.text
        if text.hasPrefix("-"), text.dropFirst().allSatisfy(\.isASCIIDigit), text.count > 1 {
            throw .invalidValue(source: value.source, value: text, expected: expected + " (not negative)")
        }
        guard !text.isEmpty, text.allSatisfy(\.isASCIIDigit) else {
            throw .invalidValue(source: value.source, value: text, expected: expected)
        }
        guard let number = Int(text), range.contains(number) else {
            throw .invalidValue(source: value.source, value: text, expected: expected)
        }
        return number
    }

    /// Plain decimal seconds: `30`, `2.5`, `.5`. No sign, exponent or unit.
    private static func parseSeconds(_ value: Value, in range: ClosedRange<Double>) throws(ServerOptionsError) -> Double {
        let expected = "seconds from \(JSONWriter.secondsText(range.lowerBound)) to \(JSONWriter.secondsText(range.upperBound)), such as 30 or 2.5"
        let text = value.text
        if text.hasPrefix("-") {
            let rest = text.dropFirst()
            if !rest.isEmpty, rest.allSatisfy({ $0.isASCIIDigit || $0 == "." }) {
                throw .invalidValue(source: value.source, value: value.text, expected: expected + " (not negative)")
            }
        }
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let digitsOnly = parts.allSatisfy { $0.allSatisfy(\.isASCIIDigit) }
        let hasDigits = parts.contains { !$0.isEmpty }
        guard digitsOnly, hasDigits, let number = Double(text), number.isFinite, range.contains(number) else {
            throw .invalidValue(source: value.source, value: value.text, expected: expected)
        }
        return number
    }

    /// Visible ASCII except the comma (the separator of `STENO_TOKENS`).
    private static func parseToken(_ value: Value) throws(ServerOptionsError) -> String {
        let valid = !value.text.isEmpty && value.text.unicodeScalars.allSatisfy {
            $0.value >= 0x21 && $0.value <= 0x7E && $0 != ","
        }
        guard valid else {
            throw .invalidValue(source: value.source, value: value.text,
                                expected: "a token of visible ASCII characters, without spaces or commas")
        }
        return value.text
    }

    /// `scheme://host[:port]`, as browsers send it in `Origin`; lowercased.
    private static func parseOrigin(_ value: Value) throws(ServerOptionsError) -> String {
        let origin = value.text.lowercased()
        let invalid = ServerOptionsError.invalidValue(
            source: value.source, value: value.text,
            expected: "an origin scheme://host[:port] without a path, such as https://example.com")
        guard let separator = origin.range(of: "://") else { throw invalid }
        let scheme = origin[..<separator.lowerBound]
        let authority = origin[separator.upperBound...]
        guard let first = scheme.first, first.isLetter,
              scheme.allSatisfy({ $0.isLetter || $0.isASCIIDigit || "+-.".contains($0) }),
              !authority.isEmpty,
              !authority.contains(where: { "/?#@ ,".contains($0) || $0.isWhitespace })
        else { throw invalid }
        return origin
    }

    private static func parseLogLevel(_ value: Value) throws(ServerOptionsError) -> LogLevel {
        let text = value.text.lowercased()
        if text == "warn" { return .warning }
        guard let level = LogLevel(rawValue: text) else {
            throw .invalidValue(source: value.source, value: value.text,
                                expected: "one of " + LogLevel.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return level
    }
}

/// Why the options could not be parsed; `description` is the message for the user.
public enum ServerOptionsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A flag that does not exist, with the nearest real one when there is one.
    case unknownOption(String, suggestion: String?)
    /// A flag at the end, or followed by another flag.
    case missingValue(option: String)
    /// Something that is not a flag.
    case unexpectedArgument(String)
    /// A value that does not fit; `source` is the flag or the environment variable.
    case invalidValue(source: String, value: String, expected: String)
    /// `--cert` without `--key`.
    case certificateWithoutKey
    /// `--key` without `--cert`.
    case keyWithoutCertificate
    /// `--viewer-token` without `--token`.
    case viewerTokenWithoutToken

    public var description: String {
        switch self {
        case let .unknownOption(name, suggestion):
            let hint = suggestion.map { " (did you mean \($0)?)" } ?? ""
            return "unknown option \(name)\(hint); see steno serve --help"
        case let .missingValue(option):
            return "\(option) needs a value"
        case let .unexpectedArgument(argument):
            return "unexpected argument '\(argument)': steno serve takes only options; see steno serve --help"
        case let .invalidValue(source, value, expected):
            return "invalid value '\(value)' for \(source): expected \(expected)"
        case .certificateWithoutKey:
            return "--cert needs --key as well: TLS needs the certificate and its private key"
        case .keyWithoutCertificate:
            return "--key needs --cert as well: TLS needs the certificate and its private key"
        case .viewerTokenWithoutToken:
            return "--viewer-token needs --token as well: without it anyone could publish while viewers need a token"
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isWholeNumber }
}
