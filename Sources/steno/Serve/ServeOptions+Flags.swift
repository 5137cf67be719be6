import StenoCore
import StenoRedis
import StenoServer
import StenoSystem
import StenoTransport

extension ServeOptions {
    /// `steno serve`'s flags, in the order of `--help` (and of parsing), with this machine's
    /// defaults in their help: one row each, holding the flag and what its value sets.
    struct Flags: Sendable {
        let entries: [ServeFlag]

        var all: [Flag] { entries.map(\.flag) }

        /// With `engines`' rows (`EngineRegistry.table`), `--engine` and `--model`.
        init(_ machine: MachineDefaults, engines: EngineRegistry = .standard) {
            let server = ServeOptions.defaults(machine, engines: engines)
            let limits = server.limits
            let layout = server.captionLayout
            func seconds(_ value: Double) -> String { JSONWriter.secondsText(value) }
            func seconds(_ value: Duration?) -> String { value.map { seconds($0.inSeconds) } ?? "0" }
            // Read by other rows: --viewer-token needs --token, --cert reads --key.
            let token = Flag("token", value: "TOKEN", help: "accepted bearer token; repeatable (env: comma-separated)",
                             default: "none (no auth)", environment: "STENO_TOKENS", repeatable: true)
            let key = Flag("key", value: "PATH", help: "TLS private key (PEM); needs --cert",
                           default: "none (plain HTTP)", environment: "STENO_KEY")
            entries = engines.table([
                ServeFlag(Flag("host", value: "ADDRESS", help: "address to listen on",
                               default: server.host, environment: "STENO_HOST"),
                          \.host, .host),
                ServeFlag(Flag("port", value: "N", help: "TCP port; 0 picks any free port",
                               default: "\(server.port)", environment: "STENO_PORT"),
                          \.port, .integer(0...65535)),
                engines.engineRow(server),
                engines.modelRow(server),
                ServeFlag(Flag("profanity", value: "MODE", help: "what captions do with profanity when a session does not say: keep, mask (f***) or remove",
                               default: server.profanity.rawValue, environment: "STENO_PROFANITY"),
                          \.profanity) { given, value throws(UsageError) in
                    ProfanityMode(rawValue: try given.choice(value, ProfanityMode.allCases.map(\.rawValue)))!
                },
                ServeFlag(Flag("web-root", value: "PATH", help: "folder served at /",
                               default: server.webRoot, environment: "STENO_WEB_ROOT"),
                          \.webRoot, .path),
                ServeFlag(Flag("max-sessions", value: "N", help: "most connected sessions at once (talkers are admitted by load)",
                               default: "\(server.maxSessions)", environment: "STENO_MAX_SESSIONS"),
                          \.maxSessions, .integer(1...100_000)),
                ServeFlag(Flag("max-frame-bytes", value: "BYTES", help: "largest WebSocket message, bytes",
                               default: "\(limits.maxFrameBytes)", environment: "STENO_MAX_FRAME_BYTES"),
                          \.limits.maxFrameBytes, .integer(1024...(16 << 20))),
                ServeFlag(Flag("buffer-seconds", value: "SECONDS", help: "audio a session may hold unanalyzed",
                               default: seconds(limits.bufferSeconds), environment: "STENO_BUFFER_SECONDS"),
                          \.limits.bufferSeconds, .seconds(0.1...3600)),
                ServeFlag(Flag("outbound-bytes", value: "BYTES", help: "unsent events a connection may hold, bytes",
                               default: "\(limits.outboundBytes)", environment: "STENO_OUTBOUND_BYTES"),
                          \.limits.outboundBytes, .integer(4096...(1 << 30))),
                ServeFlag(Flag("idle-timeout", value: "SECONDS", help: "close a session silent this long; 0 never",
                               default: seconds(limits.idleTimeoutSeconds), environment: "STENO_IDLE_TIMEOUT"),
                          \.limits.idleTimeoutSeconds, .seconds(0...86400)),
                ServeFlag(Flag("max-session-seconds", value: "SECONDS", help: "longest session; 0 unlimited",
                               default: seconds(limits.maxSessionSeconds), environment: "STENO_MAX_SESSION_SECONDS"),
                          \.limits.maxSessionSeconds, .seconds(0...(30 * 86400))),
                ServeFlag(Flag("resume-seconds", value: "SECONDS", help: "keep a session whose connection dropped this long for its client to resume; 0 never",
                               default: seconds(limits.resumeSeconds), environment: "STENO_RESUME_SECONDS"),
                          \.limits.resumeSeconds, .seconds(0...3600)),
                ServeFlag(Flag("start-timeout", value: "SECONDS", help: "close a connection that has not sent start (or resume) this long; 0 never",
                               default: seconds(limits.startTimeoutSeconds), environment: "STENO_START_TIMEOUT"),
                          \.limits.startTimeoutSeconds, .seconds(0...3600)),
                ServeFlag(Flag("stall-seconds", value: "SECONDS",
                               help: "finalize an utterance whose audio stopped mid-speech this long, freeing its recognizer; 0 never",
                               default: seconds(limits.stallSeconds), environment: "STENO_STALL_SECONDS"),
                          \.limits.stallSeconds, .seconds(0...3600)),
                ServeFlag(token, each: \.tokens, .token),
                ServeFlag(Flag("viewer-token", value: "TOKEN", help: "token that may only follow channels; needs --token; repeatable",
                               default: "none", environment: "STENO_VIEWER_TOKENS", repeatable: true)) { given, flag, options throws(UsageError) in
                    options.viewerTokens = try given.list(flag).map { (value) throws(UsageError) in try given.token(value) }
                    if !options.viewerTokens.isEmpty && options.tokens.isEmpty {
                        throw given.error(.requires(option: flag.flag, other: token.flag,
                                                    reason: "without it anyone could publish while viewers need a token"))
                    }
                },
                ServeFlag(Flag("metrics-token", value: "TOKEN", help: "token /metrics asks for; repeatable",
                               default: "none (open)", environment: "STENO_METRICS_TOKENS", repeatable: true),
                          each: \.metricsTokens, .token),
                ServeFlag(Flag("allowed-origin", value: "ORIGIN", help: "accepted Origin, e.g. https://example.com; repeatable",
                               default: "any origin", environment: "STENO_ALLOWED_ORIGINS", repeatable: true),
                          each: \.allowedOrigins, .origin),
                ServeFlag(Flag("trusted-proxy", value: "ADDRESS",
                               help: "a proxy's IP address whose X-Forwarded-For names the client in the log; repeatable",
                               default: "none (the header is ignored)", environment: "STENO_TRUSTED_PROXIES", repeatable: true),
                          each: \.trustedProxies, .ipAddress),
                ServeFlag(Flag("redis", value: "URL", help: "redis://HOST[:PORT][/DB]: channels across instances through this Redis",
                               default: "none (channels in this process only)", environment: "STENO_REDIS"),
                          \.redis) { given, value throws(UsageError) in
                    switch RedisURL.parse(value.text) {
                    case .success(let url): return url
                    case .failure(let problem):
                        throw given.error(.invalidValue(source: value.source, value: value.text,
                                                        expected: "redis://HOST[:PORT][/DB] (\(problem.reason))"))
                    }
                },
                ServeFlag(Flag("channel-lease", value: "SECONDS",
                               help: "with --redis: a publisher's hold on its channel; a dead instance's channels are free this long after it died",
                               default: seconds(server.channelLease), environment: "STENO_CHANNEL_LEASE"),
                          \.channelLease, .seconds(1...300)),
                ServeFlag(Flag("max-handshaking-per-address", value: "N",
                               help: "connections from one address still sending their request head, at most (trusted proxies exempt); one more gets 429; 0 no limit",
                               default: "\(server.maxHandshakingPerAddress)", environment: "STENO_MAX_HANDSHAKING_PER_ADDRESS"),
                          \.maxHandshakingPerAddress, .integer(0...1_000_000)),
                ServeFlag(Flag("handshake-memory", value: "MB",
                               help: "memory all connections still sending their request head may hold (24 KB each); past it a new one gets 503; 0 no limit",
                               default: "\(server.handshakeMemory >> 20)", environment: "STENO_HANDSHAKE_MEMORY"),
                          \.handshakeMemory, .megabytes(0...1_000_000)),
                ServeFlag(Flag("message-memory", value: "MB",
                               help: "memory all WebSocket messages still arriving may hold; a connection whose next piece would go over is closed 1013; 0 no limit",
                               default: "\(server.messageMemory >> 20)", environment: "STENO_MESSAGE_MEMORY"),
                          \.messageMemory, .megabytes(0...1_000_000)),
                ServeFlag(Flag("message-memory-per-address", value: "MB",
                               help: "the same for one address's connections (trusted proxies exempt); 0 no limit",
                               default: "\(server.messageMemoryPerAddress >> 20)", environment: "STENO_MESSAGE_MEMORY_PER_ADDRESS"),
                          \.messageMemoryPerAddress, .megabytes(0...1_000_000)),
                ServeFlag(Flag("cert", value: "PATH", help: "TLS certificate (PEM); needs --key",
                               default: "none (plain HTTP)", environment: "STENO_CERT")) { given, cert, options throws(UsageError) in
                    try ServeOptions.readTLS(given, certificate: cert, key: key, into: &options)
                },
                ServeFlag(key) { _, _, _ in },  // read with --cert
                ServeFlag(Flag("drain-timeout", value: "SECONDS", help: "on shutdown, wait this long for sessions to finalize",
                               default: seconds(server.drainTimeout), environment: "STENO_DRAIN_TIMEOUT"),
                          \.drainTimeout) { given, value throws(UsageError) in .seconds(try given.seconds(value, in: 0...3600)) },
                ServeFlag(Flag("keepalive", value: "SECONDS", help: "ping WebSockets this often; hang up on ones that do not answer; 0 never",
                               default: seconds(server.keepAlive), environment: "STENO_KEEPALIVE"),
                          \.keepAlive) { given, value throws(UsageError) in
                    let seconds = try given.seconds(value, in: 0...3600)
                    return seconds == 0 ? nil : .seconds(max(1, seconds.rounded()))
                },
                ServeFlag(Flag("write-stall-seconds", value: "SECONDS",
                               help: "close a connection as a slow consumer (4008) when its events wait this long with nothing written; 0 never",
                               default: seconds(server.writeStall), environment: "STENO_WRITE_STALL_SECONDS"),
                          \.writeStall) { given, value throws(UsageError) in
                    let seconds = try given.seconds(value, in: 0...3600)
                    return seconds == 0 ? nil : .seconds(max(1, seconds))
                },
                ServeFlag(Flag("workers", value: "N", help: "threads for decoding and recognition",
                               default: "\(server.workers)", environment: "STENO_WORKERS"),
                          \.workers, .integer(1...256)),
                ServeFlag(Flag("event-loop", value: "LOOP",
                               help: EventLoop.allCases.map(\.rawValue).joined(separator: "|") + ": what waits on the sockets",
                               default: "libuv (poll if libwebsockets-evlib-uv is missing)", environment: "STENO_EVENT_LOOP"),
                          \.eventLoop) { given, value throws(UsageError) in
                    guard let loop = EventLoop(rawValue: value.text.lowercased()) else {
                        throw given.error(.invalidValue(source: value.source, value: value.text,
                                                        expected: "one of " + EventLoop.allCases.map(\.rawValue).joined(separator: ", ")))
                    }
                    return loop
                },
                ServeFlag(Flag("recognizers", value: "N", help: "shared decoders: utterances recognized at once (≈95 MB each)",
                               default: "\(server.recognizers)", environment: "STENO_RECOGNIZERS"),
                          \.recognizers, .integer(1...1000)),
                ServeFlag(Flag("spare-recognizers", value: "N",
                               help: "shared decoders kept idle ahead of speech, made at start and again as they are lent; the rest only when speech needs them (less memory, a slower ramp)",
                               default: "all of --recognizers", environment: "STENO_SPARE_RECOGNIZERS"),
                          \.spareRecognizers, .integer(0...1000)),
                ServeFlag(Flag("audio-batch-seconds", value: "SECONDS",
                               help: "audio goes to a session's worker in batches this long (one recognizer block); 0: each message as it comes (to measure what batching saves)",
                               default: seconds(server.audioBatchSeconds), environment: "STENO_AUDIO_BATCH_SECONDS"),
                          \.audioBatchSeconds, .seconds(0...1)),
                ServeFlag(Flag("lag-target", value: "SECONDS", help: "refuse new sessions while live talkers lag more than this; 0 never for load",
                               default: seconds(server.lagTarget), environment: "STENO_LAG_TARGET"),
                          \.lagTarget, .seconds(0...3600)),
                ServeFlag(Flag("admit-utilization", value: "FRACTION",
                               help: "refuse new sessions while talkers' recent demand plus one more would take more than this share of the workers' time; 0: by lag alone",
                               default: JSONWriter.secondsText(server.admitUtilization), environment: "STENO_ADMIT_UTILIZATION"),
                          \.admitUtilization, .fraction),
                ServeFlag(Flag("caption-line-length", value: "N", help: "characters per line of a caption cue (files, HLS)",
                               default: "\(layout.maxLineLength)", environment: "STENO_CAPTION_LINE_LENGTH"),
                          \.captionLayout.maxLineLength, .integer(10...200)),
                ServeFlag(Flag("caption-lines", value: "N", help: "lines per caption cue",
                               default: "\(layout.maxLines)", environment: "STENO_CAPTION_LINES"),
                          \.captionLayout.maxLines, .integer(1...4)),
                ServeFlag(Flag("caption-min-seconds", value: "SECONDS", help: "shortest caption cue (time to read it)",
                               default: seconds(layout.minDuration), environment: "STENO_CAPTION_MIN_SECONDS"),
                          \.captionLayout.minDuration, .seconds(0...10)),
                ServeFlag(Flag("caption-max-seconds", value: "SECONDS", help: "longest caption cue; longer finals are split",
                               default: seconds(layout.maxDuration), environment: "STENO_CAPTION_MAX_SECONDS"),
                          read: ServeOptions.readLongestCue),
                ServeFlag(Flag("hls-segment-seconds", value: "SECONDS", help: "length of a channel's HLS caption segments",
                               default: seconds(server.hls.segmentSeconds), environment: "STENO_HLS_SEGMENT_SECONDS"),
                          \.hls.segmentSeconds, .seconds(1...60)),
                ServeFlag(Flag("hls-window", value: "N", help: "segments listed in a channel's live HLS playlist",
                               default: "\(server.hls.windowSegments)", environment: "STENO_HLS_WINDOW"),
                          \.hls.windowSegments, .integer(3...1000)),
                // MPEG-TS time wraps at 2^33 ticks of 90 kHz (26.5 hours).
                ServeFlag(Flag("hls-mpegts-offset", value: "SECONDS",
                               help: "the video's MPEG-TS time of audio time 0 (X-TIMESTAMP-MAP)",
                               default: seconds(server.hls.mpegtsOffset), environment: "STENO_HLS_MPEGTS_OFFSET"),
                          \.hls.mpegtsOffset, .seconds(0...95_443)),
                ServeFlag(Flag("past-broadcasts", value: "N", help: "ended broadcasts a channel keeps the captions of",
                               default: "\(server.pastBroadcasts)", environment: "STENO_PAST_BROADCASTS"),
                          \.pastBroadcasts, .integer(0...100)),
                ServeFlag(Flag("log-level", value: "LEVEL", help: LogLevel.allCases.map(\.rawValue).joined(separator: "|"),
                               default: server.logLevel.rawValue, environment: "STENO_LOG_LEVEL"),
                          \.logLevel, .logLevel),
            ], defaults: server)
        }
    }

    /// `--cert` and `--key`: both or neither.
    static func readTLS(_ given: ParsedCommandLine, certificate: Flag, key: Flag,
                        into options: inout ServerOptions) throws(UsageError) {
        let certificatePath = try given.single(certificate).map { (value) throws(UsageError) in try given.path(value) }
        let keyPath = try given.single(key).map { (value) throws(UsageError) in try given.path(value) }
        let reason = "TLS needs the certificate and its private key"
        switch (certificatePath, keyPath) {
        case let (certificatePath?, keyPath?): options.tls = ServerOptions.TLS(certificatePath: certificatePath, privateKeyPath: keyPath)
        case (nil, nil): options.tls = nil
        case (_?, nil): throw given.error(.requires(option: certificate.flag, other: key.flag, reason: reason))
        case (nil, _?): throw given.error(.requires(option: key.flag, other: certificate.flag, reason: reason))
        }
    }

    /// `--caption-max-seconds`, after `--caption-min-seconds`: a longest cue shorter than the
    /// shortest is refused, and a shortest above the default longest takes the longest with it.
    static func readLongestCue(_ given: ParsedCommandLine, _ flag: Flag, _ options: inout ServerOptions) throws(UsageError) {
        var layout = options.captionLayout
        if let value = given.single(flag) {
            layout.maxDuration = try given.seconds(value, in: 1...60)
            if layout.maxDuration < layout.minDuration {
                throw given.error(.invalidValue(source: value.source, value: value.text,
                                                expected: "at least the shortest cue (\(JSONWriter.secondsText(layout.minDuration)) s)"))
            }
        }
        layout.maxDuration = max(layout.maxDuration, layout.minDuration)
        options.captionLayout = layout
    }
}
