import StenoCore
import StenoRedis
import StenoServer
import StenoSystem
import StenoTransport

/// `steno serve`'s command line: every server option as a flag and a `STENO_*` variable,
/// parsed into the plain `ServerOptions`.
///
/// Parsing is pure: it reads only its arguments, the environment and the
/// ``MachineDefaults`` it is given, and checks values without touching the file system
/// (whether the model and web root exist is for the server to find out at start).
struct ServeOptions {
    /// The flags, with this machine's defaults in their help.
    struct Flags {
        let engine, profanity, whisperPython, whisperWorker, whisperDevice, whisperThreads, whisperBatch: Flag
        let host, port, model, webRoot, maxSessions, maxFrameBytes, bufferSeconds, outboundBytes: Flag
        let idleTimeout, maxSessionSeconds, token, viewerToken, metricsToken, allowedOrigin, trustedProxy, redis, channelLease, handshakingPerAddress, handshakeMemory, messageMemory, messageMemoryPerAddress, cert, key: Flag
        let resumeSeconds, startTimeout, stallSeconds, drainTimeout, keepAlive, writeStall, echoRoute, workers, eventLoop, recognizers, spareRecognizers, dedicatedRecognizers, audioBatch, decoder, endpointing, lagTarget, admitUtilization, logLevel: Flag
        let captionLineLength, captionLines, captionMinSeconds, captionMaxSeconds: Flag
        let hlsSegmentSeconds, hlsWindow, hlsMpegtsOffset, pastBroadcasts: Flag

        init(_ machine: MachineDefaults) {
            let server = ServeOptions.defaults(machine)
            let limits = server.limits
            func seconds(_ value: Double) -> String { JSONWriter.secondsText(value) }
            func seconds(_ value: Duration?) -> String { value.map { seconds($0.inSeconds) } ?? "0" }
            host = Flag("host", value: "ADDRESS", help: "address to listen on",
                        default: server.host, environment: "STENO_HOST")
            port = Flag("port", value: "N", help: "TCP port; 0 picks any free port",
                        default: "\(server.port)", environment: "STENO_PORT")
            engine = Flag("engine", value: "NAME", help: "engine of sessions that name no model: whisper (pocketsphinx beside it) or pocketsphinx (alone)",
                          default: server.engine, environment: "STENO_ENGINE")
            model = Flag("model", value: "PATH",
                         help: "pocketsphinx model: DIR or NAME=DIR[,lm=FILE][,dict=FILE]; whisper:DIR or whisper:NAME=DIR a CTranslate2 Whisper folder; repeatable",
                         default: server.modelPath + ", whisper tiny.en", environment: "STENO_MODEL")
            profanity = Flag("profanity", value: "MODE", help: "what captions do with profanity when a session does not say: keep, mask (f***) or remove",
                             default: server.profanity.rawValue, environment: "STENO_PROFANITY")
            whisperPython = Flag("whisper-python", value: "PATH", help: "Python with the Whisper worker's packages (scripts/bootstrap.sh makes it)",
                                 default: server.whisper.python, environment: "STENO_WHISPER_PYTHON")
            whisperWorker = Flag("whisper-worker", value: "PATH", help: "the Whisper worker program",
                                 default: server.whisper.worker, environment: "STENO_WHISPER_WORKER")
            whisperDevice = Flag("whisper-device", value: "DEVICE", help: "where Whisper computes: cpu or cuda",
                                 default: server.whisper.device, environment: "STENO_WHISPER_DEVICE")
            whisperThreads = Flag("whisper-threads", value: "N", help: "Whisper's threads per batch; 0: one per core",
                                  default: "\(server.whisper.threads)", environment: "STENO_WHISPER_THREADS")
            whisperBatch = Flag("whisper-batch", value: "N", help: "most utterances Whisper decodes in one call",
                                default: "\(server.whisper.batch)", environment: "STENO_WHISPER_BATCH")
            webRoot = Flag("web-root", value: "PATH", help: "folder served at /",
                           default: server.webRoot, environment: "STENO_WEB_ROOT")
            maxSessions = Flag("max-sessions", value: "N", help: "most connected sessions at once (talkers are admitted by load)",
                               default: "\(server.maxSessions)", environment: "STENO_MAX_SESSIONS")
            maxFrameBytes = Flag("max-frame-bytes", value: "BYTES", help: "largest WebSocket message, bytes",
                                 default: "\(limits.maxFrameBytes)", environment: "STENO_MAX_FRAME_BYTES")
            bufferSeconds = Flag("buffer-seconds", value: "SECONDS", help: "audio a session may hold unanalyzed",
                                 default: seconds(limits.bufferSeconds), environment: "STENO_BUFFER_SECONDS")
            outboundBytes = Flag("outbound-bytes", value: "BYTES", help: "unsent events a connection may hold, bytes",
                                 default: "\(limits.outboundBytes)", environment: "STENO_OUTBOUND_BYTES")
            idleTimeout = Flag("idle-timeout", value: "SECONDS", help: "close a session silent this long; 0 never",
                               default: seconds(limits.idleTimeoutSeconds), environment: "STENO_IDLE_TIMEOUT")
            maxSessionSeconds = Flag("max-session-seconds", value: "SECONDS", help: "longest session; 0 unlimited",
                                     default: seconds(limits.maxSessionSeconds), environment: "STENO_MAX_SESSION_SECONDS")
            token = Flag("token", value: "TOKEN", help: "accepted bearer token; repeatable (env: comma-separated)",
                         default: "none (no auth)", environment: "STENO_TOKENS", repeatable: true)
            viewerToken = Flag("viewer-token", value: "TOKEN", help: "token that may only follow channels; needs --token; repeatable",
                               default: "none", environment: "STENO_VIEWER_TOKENS", repeatable: true)
            metricsToken = Flag("metrics-token", value: "TOKEN", help: "token /metrics asks for; repeatable",
                                default: "none (open)", environment: "STENO_METRICS_TOKENS", repeatable: true)
            allowedOrigin = Flag("allowed-origin", value: "ORIGIN", help: "accepted Origin, e.g. https://example.com; repeatable",
                                 default: "any origin", environment: "STENO_ALLOWED_ORIGINS", repeatable: true)
            trustedProxy = Flag("trusted-proxy", value: "ADDRESS",
                                help: "a proxy's IP address whose X-Forwarded-For names the client in the log; repeatable",
                                default: "none (the header is ignored)", environment: "STENO_TRUSTED_PROXIES", repeatable: true)
            redis = Flag("redis", value: "URL", help: "redis://HOST[:PORT][/DB]: channels across instances through this Redis",
                         default: "none (channels in this process only)", environment: "STENO_REDIS")
            handshakingPerAddress = Flag("max-handshaking-per-address", value: "N",
                                         help: "connections from one address still sending their request head, at most (trusted proxies exempt); one more gets 429; 0 no limit",
                                         default: "\(server.maxHandshakingPerAddress)", environment: "STENO_MAX_HANDSHAKING_PER_ADDRESS")
            handshakeMemory = Flag("handshake-memory", value: "MB",
                                   help: "memory all connections still sending their request head may hold (24 KB each); past it a new one gets 503; 0 no limit",
                                   default: "\(server.handshakeMemory >> 20)", environment: "STENO_HANDSHAKE_MEMORY")
            messageMemory = Flag("message-memory", value: "MB",
                                 help: "memory all WebSocket messages still arriving may hold; a connection whose next piece would go over is closed 1013; 0 no limit",
                                 default: "\(server.messageMemory >> 20)", environment: "STENO_MESSAGE_MEMORY")
            messageMemoryPerAddress = Flag("message-memory-per-address", value: "MB",
                                           help: "the same for one address's connections (trusted proxies exempt); 0 no limit",
                                           default: "\(server.messageMemoryPerAddress >> 20)", environment: "STENO_MESSAGE_MEMORY_PER_ADDRESS")
            channelLease = Flag("channel-lease", value: "SECONDS",
                                help: "with --redis: a publisher's hold on its channel; a dead instance's channels are free this long after it died",
                                default: seconds(server.channelLease), environment: "STENO_CHANNEL_LEASE")
            cert = Flag("cert", value: "PATH", help: "TLS certificate (PEM); needs --key",
                        default: "none (plain HTTP)", environment: "STENO_CERT")
            key = Flag("key", value: "PATH", help: "TLS private key (PEM); needs --cert",
                       default: "none (plain HTTP)", environment: "STENO_KEY")
            resumeSeconds = Flag("resume-seconds", value: "SECONDS", help: "keep a session whose connection dropped this long for its client to resume; 0 never",
                                 default: seconds(limits.resumeSeconds), environment: "STENO_RESUME_SECONDS")
            startTimeout = Flag("start-timeout", value: "SECONDS", help: "close a connection that has not sent start (or resume) this long; 0 never",
                                default: seconds(limits.startTimeoutSeconds), environment: "STENO_START_TIMEOUT")
            stallSeconds = Flag("stall-seconds", value: "SECONDS",
                                help: "finalize an utterance whose audio stopped mid-speech this long, freeing its recognizer; 0 never",
                                default: seconds(limits.stallSeconds), environment: "STENO_STALL_SECONDS")
            drainTimeout = Flag("drain-timeout", value: "SECONDS", help: "on shutdown, wait this long for sessions to finalize",
                                default: seconds(server.drainTimeout), environment: "STENO_DRAIN_TIMEOUT")
            keepAlive = Flag("keepalive", value: "SECONDS", help: "ping WebSockets this often; hang up on ones that do not answer; 0 never",
                             default: seconds(server.keepAlive), environment: "STENO_KEEPALIVE")
            writeStall = Flag("write-stall-seconds", value: "SECONDS",
                              help: "close a connection as a slow consumer (4008) when its events wait this long with nothing written; 0 never",
                              default: seconds(server.writeStall), environment: "STENO_WRITE_STALL_SECONDS")
            echoRoute = Flag("echo-route", value: "PATH",
                             help: "conformance tests only: a WebSocket route that echoes every message (no session, no token)",
                             default: "none", environment: "STENO_ECHO_ROUTE")
            workers = Flag("workers", value: "N", help: "threads for decoding and recognition",
                           default: "\(server.workers)", environment: "STENO_WORKERS")
            eventLoop = Flag("event-loop", value: "LOOP",
                             help: EventLoop.allCases.map(\.rawValue).joined(separator: "|") + ": what waits on the sockets",
                             default: "libuv (poll if libwebsockets-evlib-uv is missing)", environment: "STENO_EVENT_LOOP")
            recognizers = Flag("recognizers", value: "N", help: "shared decoders: utterances recognized at once (≈95 MB each)",
                               default: "\(server.recognizers)", environment: "STENO_RECOGNIZERS")
            spareRecognizers = Flag("spare-recognizers", value: "N",
                                    help: "shared decoders kept idle ahead of speech, made at start and again as they are lent; the rest only when speech needs them (less memory, a slower ramp)",
                                    default: "all of --recognizers", environment: "STENO_SPARE_RECOGNIZERS")
            decoder = Flag("decoder", value: "OPTIONS", help: DecoderFlag.help,
                           default: DecoderFlag.defaultText, environment: "STENO_DECODER")
            endpointing = Flag("endpointing", value: "MODE", help: EndpointingFlag.help,
                               default: EndpointingFlag.text(EndpointingFlag.serverDefault), environment: "STENO_ENDPOINTING")
            dedicatedRecognizers = Flag.toggle("dedicated-recognizers",
                                               help: "each session keeps a recognizer to its end (the design before sharing, to compare)",
                                               environment: "STENO_DEDICATED_RECOGNIZERS")
            audioBatch = Flag("audio-batch-seconds", value: "SECONDS",
                              help: "audio goes to a session's worker in batches this long (one recognizer block); 0: each message as it comes (to measure what batching saves)",
                              default: seconds(server.audioBatchSeconds), environment: "STENO_AUDIO_BATCH_SECONDS")
            lagTarget = Flag("lag-target", value: "SECONDS", help: "refuse new sessions while live talkers lag more than this; 0 never for load",
                             default: seconds(server.lagTarget), environment: "STENO_LAG_TARGET")
            admitUtilization = Flag("admit-utilization", value: "FRACTION",
                                    help: "refuse new sessions while talkers' recent demand plus one more would take more than this share of the workers' time; 0: by lag alone",
                                    default: JSONWriter.secondsText(server.admitUtilization), environment: "STENO_ADMIT_UTILIZATION")
            logLevel = Flag("log-level", value: "LEVEL", help: LogLevel.allCases.map(\.rawValue).joined(separator: "|"),
                            default: server.logLevel.rawValue, environment: "STENO_LOG_LEVEL")
            let layout = server.captionLayout
            captionLineLength = Flag("caption-line-length", value: "N", help: "characters per line of a caption cue (files, HLS)",
                                     default: "\(layout.maxLineLength)", environment: "STENO_CAPTION_LINE_LENGTH")
            captionLines = Flag("caption-lines", value: "N", help: "lines per caption cue",
                                default: "\(layout.maxLines)", environment: "STENO_CAPTION_LINES")
            captionMinSeconds = Flag("caption-min-seconds", value: "SECONDS", help: "shortest caption cue (time to read it)",
                                     default: seconds(layout.minDuration), environment: "STENO_CAPTION_MIN_SECONDS")
            captionMaxSeconds = Flag("caption-max-seconds", value: "SECONDS", help: "longest caption cue; longer finals are split",
                                     default: seconds(layout.maxDuration), environment: "STENO_CAPTION_MAX_SECONDS")
            hlsSegmentSeconds = Flag("hls-segment-seconds", value: "SECONDS", help: "length of a channel's HLS caption segments",
                                     default: seconds(server.hls.segmentSeconds), environment: "STENO_HLS_SEGMENT_SECONDS")
            hlsWindow = Flag("hls-window", value: "N", help: "segments listed in a channel's live HLS playlist",
                             default: "\(server.hls.windowSegments)", environment: "STENO_HLS_WINDOW")
            hlsMpegtsOffset = Flag("hls-mpegts-offset", value: "SECONDS",
                                   help: "the video's MPEG-TS time of audio time 0 (X-TIMESTAMP-MAP)",
                                   default: seconds(server.hls.mpegtsOffset), environment: "STENO_HLS_MPEGTS_OFFSET")
            pastBroadcasts = Flag("past-broadcasts", value: "N", help: "ended broadcasts a channel keeps the captions of",
                                  default: "\(server.pastBroadcasts)", environment: "STENO_PAST_BROADCASTS")
        }

        var all: [Flag] {
            [host, port, engine, model, profanity, whisperPython, whisperWorker, whisperDevice, whisperThreads, whisperBatch, webRoot, maxSessions, maxFrameBytes, bufferSeconds, outboundBytes, idleTimeout,
             maxSessionSeconds, resumeSeconds, startTimeout, stallSeconds, token, viewerToken, metricsToken, allowedOrigin, trustedProxy, redis, channelLease, handshakingPerAddress, handshakeMemory, messageMemory, messageMemoryPerAddress, cert, key, drainTimeout, keepAlive, writeStall, echoRoute, workers,
             eventLoop, recognizers, spareRecognizers, dedicatedRecognizers, audioBatch, decoder, endpointing, lagTarget, admitUtilization, captionLineLength, captionLines, captionMinSeconds, captionMaxSeconds,
             hlsSegmentSeconds, hlsWindow, hlsMpegtsOffset, pastBroadcasts, logLevel]
        }
    }

    static func spec(_ machine: MachineDefaults) -> CommandSpec {
        CommandSpec(
            command: "steno serve",
            summary: """
                Serves live captions over WebSocket (/v1/stream, /v1/listen), the web client (/),
                /healthz and /metrics. Every option can also be set by the environment variable
                shown; the command line wins. Times are in seconds.
                """,
            flags: Flags(machine).all)
    }

    /// The options when nothing is given, on `machine`.
    static func defaults(_ machine: MachineDefaults) -> ServerOptions {
        var options = ServerOptions(hardware: machine.hardware)
        options.modelPath = machine.modelPath
        options.whisper.python = machine.whisperPython
        options.whisper.worker = machine.whisperWorker
        options.webRoot = machine.webRoot
        options.endpointing = EndpointingFlag.serverDefault
        return options
    }

    /// The parsed command line, or nil when it asked for the help text.
    static func parse(_ arguments: [String], environment: [String: String],
                      machine: MachineDefaults) throws(UsageError) -> ServerOptions? {
        let flags = Flags(machine)
        let given = try spec(machine).parse(arguments, environment: environment)
        if given.helpRequested { return nil }
        var options = defaults(machine)

        if let value = given.single(flags.host) { options.host = try given.host(value) }
        if let value = given.single(flags.port) { options.port = try given.integer(value, in: 0...65535) }
        try parseModels(given, flags, into: &options)
        if let value = given.single(flags.webRoot) { options.webRoot = try given.path(value) }
        if let value = given.single(flags.maxSessions) {
            options.maxSessions = try given.integer(value, in: 1...100_000)
        }
        if let value = given.single(flags.maxFrameBytes) {
            options.limits.maxFrameBytes = try given.integer(value, in: 1024...(16 << 20))
        }
        if let value = given.single(flags.bufferSeconds) {
            options.limits.bufferSeconds = try given.seconds(value, in: 0.1...3600)
        }
        if let value = given.single(flags.outboundBytes) {
            options.limits.outboundBytes = try given.integer(value, in: 4096...(1 << 30))
        }
        if let value = given.single(flags.idleTimeout) {
            options.limits.idleTimeoutSeconds = try given.seconds(value, in: 0...86400)
        }
        if let value = given.single(flags.maxSessionSeconds) {
            options.limits.maxSessionSeconds = try given.seconds(value, in: 0...(30 * 86400))
        }
        if let value = given.single(flags.resumeSeconds) {
            options.limits.resumeSeconds = try given.seconds(value, in: 0...3600)
        }
        if let value = given.single(flags.startTimeout) {
            options.limits.startTimeoutSeconds = try given.seconds(value, in: 0...3600)
        }
        if let value = given.single(flags.stallSeconds) {
            options.limits.stallSeconds = try given.seconds(value, in: 0...3600)
        }
        options.tokens = try given.list(flags.token).map { (value) throws(UsageError) in try given.token(value) }
        options.viewerTokens = try given.list(flags.viewerToken).map { (value) throws(UsageError) in try given.token(value) }
        if !options.viewerTokens.isEmpty && options.tokens.isEmpty {
            throw given.error(.requires(option: flags.viewerToken.flag, other: flags.token.flag,
                                        reason: "without it anyone could publish while viewers need a token"))
        }
        options.metricsTokens = try given.list(flags.metricsToken).map { (value) throws(UsageError) in try given.token(value) }
        options.allowedOrigins = try given.list(flags.allowedOrigin).map { (value) throws(UsageError) in
            try given.origin(value)
        }
        options.trustedProxies = try given.list(flags.trustedProxy).map { (value) throws(UsageError) in
            try given.ipAddress(value)
        }
        if let value = given.single(flags.redis) {
            switch RedisURL.parse(value.text) {
            case .success(let url): options.redis = url
            case .failure(let problem):
                throw given.error(.invalidValue(source: value.source, value: value.text,
                                                expected: "redis://HOST[:PORT][/DB] (\(problem.reason))"))
            }
        }
        if let value = given.single(flags.handshakingPerAddress) {
            options.maxHandshakingPerAddress = try given.integer(value, in: 0...1_000_000)
        }
        if let value = given.single(flags.handshakeMemory) {
            options.handshakeMemory = try given.integer(value, in: 0...1_000_000) << 20
        }
        if let value = given.single(flags.messageMemory) {
            options.messageMemory = try given.integer(value, in: 0...1_000_000) << 20
        }
        if let value = given.single(flags.messageMemoryPerAddress) {
            options.messageMemoryPerAddress = try given.integer(value, in: 0...1_000_000) << 20
        }
        if let value = given.single(flags.channelLease) {
            options.channelLease = try given.seconds(value, in: 1...300)
        }
        let certificate = try given.single(flags.cert).map { (value) throws(UsageError) in try given.path(value) }
        let key = try given.single(flags.key).map { (value) throws(UsageError) in try given.path(value) }
        let tlsReason = "TLS needs the certificate and its private key"
        switch (certificate, key) {
        case let (certificate?, key?): options.tls = ServerOptions.TLS(certificatePath: certificate, privateKeyPath: key)
        case (nil, nil): options.tls = nil
        case (_?, nil): throw given.error(.requires(option: flags.cert.flag, other: flags.key.flag, reason: tlsReason))
        case (nil, _?): throw given.error(.requires(option: flags.key.flag, other: flags.cert.flag, reason: tlsReason))
        }
        if let value = given.single(flags.drainTimeout) {
            options.drainTimeout = .seconds(try given.seconds(value, in: 0...3600))
        }
        if let value = given.single(flags.keepAlive) {
            let seconds = try given.seconds(value, in: 0...3600)
            options.keepAlive = seconds == 0 ? nil : .seconds(max(1, seconds.rounded()))
        }
        if let value = given.single(flags.writeStall) {
            let seconds = try given.seconds(value, in: 0...3600)
            options.writeStall = seconds == 0 ? nil : .seconds(max(1, seconds))
        }
        if let value = given.single(flags.echoRoute) {
            guard value.text.hasPrefix("/"), !value.text.contains("?") else {
                throw given.error(.invalidValue(source: value.source, value: value.text, expected: "a path such as /echo"))
            }
            options.echoPath = value.text
        }
        if let value = given.single(flags.workers) { options.workers = try given.integer(value, in: 1...256) }
        if let value = given.single(flags.eventLoop) {
            guard let loop = EventLoop(rawValue: value.text.lowercased()) else {
                throw given.error(.invalidValue(source: value.source, value: value.text,
                                                expected: "one of " + EventLoop.allCases.map(\.rawValue).joined(separator: ", ")))
            }
            options.eventLoop = loop
        }
        if let value = given.single(flags.recognizers) { options.recognizers = try given.integer(value, in: 1...1000) }
        if let value = given.single(flags.spareRecognizers) { options.spareRecognizers = try given.integer(value, in: 0...1000) }
        options.dedicatedRecognizers = given.isOn(flags.dedicatedRecognizers)
        if let value = given.single(flags.audioBatch) {
            options.audioBatchSeconds = try given.seconds(value, in: 0...1)
        }
        if let value = given.single(flags.decoder) { options.decoderArguments = try given.decoderArguments(value) }
        if let value = given.single(flags.endpointing) { options.endpointing = try given.endpointing(value) }
        if let value = given.single(flags.lagTarget) { options.lagTarget = try given.seconds(value, in: 0...3600) }
        if let value = given.single(flags.admitUtilization) { options.admitUtilization = try given.fraction(value) }
        var layout = options.captionLayout
        if let value = given.single(flags.captionLineLength) { layout.maxLineLength = try given.integer(value, in: 10...200) }
        if let value = given.single(flags.captionLines) { layout.maxLines = try given.integer(value, in: 1...4) }
        if let value = given.single(flags.captionMinSeconds) { layout.minDuration = try given.seconds(value, in: 0...10) }
        if let value = given.single(flags.captionMaxSeconds) {
            layout.maxDuration = try given.seconds(value, in: 1...60)
            if layout.maxDuration < layout.minDuration {
                throw given.error(.invalidValue(source: value.source, value: value.text,
                                                expected: "at least the shortest cue (\(JSONWriter.secondsText(layout.minDuration)) s)"))
            }
        }
        options.captionLayout = CaptionLayout(maxLineLength: layout.maxLineLength, maxLines: layout.maxLines,
                                              minDuration: layout.minDuration, maxDuration: max(layout.maxDuration, layout.minDuration))
        var hls = options.hls
        if let value = given.single(flags.hlsSegmentSeconds) { hls.segmentSeconds = try given.seconds(value, in: 1...60) }
        if let value = given.single(flags.hlsWindow) { hls.windowSegments = try given.integer(value, in: 3...1000) }
        // MPEG-TS time wraps at 2^33 ticks of 90 kHz (26.5 hours).
        if let value = given.single(flags.hlsMpegtsOffset) { hls.mpegtsOffset = try given.seconds(value, in: 0...95_443) }
        options.hls = hls
        if let value = given.single(flags.pastBroadcasts) { options.pastBroadcasts = try given.integer(value, in: 0...100) }
        if let value = given.single(flags.logLevel) { options.logLevel = try given.logLevel(value) }
        return options
    }

    /// `--engine`, `--model` (pocketsphinx specs and at most one `whisper:`) and the worker's flags.
    private static func parseModels(_ given: ParsedCommandLine, _ flags: Flags, into options: inout ServerOptions) throws(UsageError) {
        if let value = given.single(flags.engine) { options.engine = try given.choice(value, ["whisper", "pocketsphinx"]) }
        if let value = given.single(flags.profanity) {
            options.profanity = ProfanityMode(rawValue: try given.choice(value, ProfanityMode.allCases.map(\.rawValue)))!
        }
        var values: [FlagValue] = []
        if given.wasGiven(flags.model), case let list = given.list(flags.model), list.count > 1 {
            values = list  // several models, one per flag (STENO_MODEL holds one: a model's spec has commas)
        } else if let value = given.single(flags.model) {
            values = [value]
        }
        var pocketsphinx: [String] = []
        for value in values {
            let spec = try given.path(value)
            guard spec.hasPrefix("whisper:") else {
                pocketsphinx.append(spec)
                continue
            }
            if options.whisper.model != nil {
                throw given.error(.invalidValue(source: value.source, value: value.text, expected: "one whisper: model"))
            }
            let rest = String(spec.dropFirst("whisper:".count))
            if let equals = rest.firstIndex(of: "="), !rest[..<equals].contains("/") {
                options.whisper.name = String(rest[..<equals])
                options.whisper.model = String(rest[rest.index(after: equals)...])
            } else {
                options.whisper.model = rest
            }
            if options.whisper.model?.isEmpty != false || options.whisper.name?.isEmpty == true {
                throw given.error(.invalidValue(source: value.source, value: value.text, expected: "whisper:DIR or whisper:NAME=DIR"))
            }
        }
        if pocketsphinx.count == 1 { options.modelPath = pocketsphinx[0] }
        if pocketsphinx.count > 1 {
            options.models = pocketsphinx
            options.modelPath = pocketsphinx[0]
        }
        if let value = given.single(flags.whisperPython) { options.whisper.python = try given.path(value) }
        if let value = given.single(flags.whisperWorker) { options.whisper.worker = try given.path(value) }
        if let value = given.single(flags.whisperDevice) { options.whisper.device = try given.choice(value, ["cpu", "cuda"]) }
        if let value = given.single(flags.whisperThreads) { options.whisper.threads = try given.integer(value, in: 0...256) }
        if let value = given.single(flags.whisperBatch) { options.whisper.batch = try given.integer(value, in: 1...256) }
    }
}
