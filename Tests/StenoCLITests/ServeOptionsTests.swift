import StenoCore
import StenoRedis
import StenoServer
import Testing
import StenoSpeech
@testable import steno

private let machine = MachineDefaults(
    cores: 2, physicalMemory: 8 << 30, modelPath: "/models/en-us", webRoot: "/srv/web-client")

private func parse(_ arguments: [String], _ environment: [String: String] = [:]) throws -> ServerOptions {
    try #require(try ServeOptions.parse(arguments, environment: environment, machine: machine))
}

private func helpRequested(_ arguments: [String]) throws -> Bool {
    try ServeOptions.parse(arguments, environment: [:], machine: machine) == nil
}

private let flags = ServeOptions.Flags(machine)

/// The error parsing throws, or nil if it succeeds.
private func failure(_ arguments: [String], _ environment: [String: String] = [:]) -> UsageError? {
    do {
        _ = try ServeOptions.parse(arguments, environment: environment, machine: machine)
        return nil
    } catch {
        return error
    }
}

/// The problem of the error parsing throws, or nil if it succeeds.
private func problem(_ arguments: [String], _ environment: [String: String] = [:]) -> UsageError.Problem? {
    failure(arguments, environment)?.problem
}

@Suite struct ServeOptionsTests {
    @Test func defaults() throws {
        let options = try parse([])
        #expect(options.host == "127.0.0.1")
        #expect(options.port == 8080)
        #expect(options.modelPath == "/models/en-us")
        #expect(options.webRoot == "/srv/web-client")
        #expect(options.maxSessions == 10_000)
        #expect(options.recognizers == 16)
        #expect(options.limits.maxFrameBytes == 65536)
        #expect(options.limits.bufferSeconds == 10)
        #expect(options.limits.outboundBytes == 1_048_576)
        #expect(options.limits.idleTimeoutSeconds == 30)
        #expect(options.limits.maxSessionSeconds == 4 * 3600)
        #expect(options.limits == SessionLimits())
        #expect(options.tokens == [])
        #expect(options.allowedOrigins == [])
        #expect(options.tls == nil)
        #expect(options.drainTimeout == .seconds(10))
        #expect(options.workers == 2)
        #expect(options.logLevel == .info)
        #expect(options.keepAlive == .seconds(30))
        #expect(options.captionLayout == CaptionLayout(maxLineLength: 42, maxLines: 2, minDuration: 1, maxDuration: 7))
        #expect(options.hls == HLSConfiguration(segmentSeconds: 6, windowSegments: 10, mpegtsOffset: 0))
        #expect(options.pastBroadcasts == 4)
        #expect(options.eventLoop == nil)  // the transport's own: libuv when its plugin is there
        #expect(options == ServeOptions.defaults(machine))
    }

    @Test func captionAndHLSFlags() throws {
        let options = try parse([
            "--caption-line-length", "32", "--caption-lines", "3", "--caption-min-seconds", "1.5",
            "--caption-max-seconds", "5", "--hls-segment-seconds", "4", "--hls-window", "6",
            "--hls-mpegts-offset", "1.4", "--past-broadcasts", "0",
        ])
        #expect(options.captionLayout == CaptionLayout(maxLineLength: 32, maxLines: 3, minDuration: 1.5, maxDuration: 5))
        #expect(options.hls == HLSConfiguration(segmentSeconds: 4, windowSegments: 6, mpegtsOffset: 1.4))
        #expect(options.hls.mpegtsTicks == 126_000)
        #expect(options.pastBroadcasts == 0)
        // A longest cue shorter than the shortest is refused; a shortest above the default
        // longest takes the longest with it.
        #expect(problem(["--caption-min-seconds", "3", "--caption-max-seconds", "2"]) == .invalidValue(
            source: "--caption-max-seconds", value: "2", expected: "at least the shortest cue (3 s)"))
        let long = try parse(["--caption-min-seconds", "8"]).captionLayout
        #expect(long.minDuration == 8 && long.maxDuration == 8)
        for bad in [["--caption-line-length", "5"], ["--caption-lines", "0"], ["--caption-max-seconds", "0.5"],
                    ["--hls-segment-seconds", "0.5"], ["--hls-window", "2"], ["--hls-mpegts-offset", "-1"],
                    ["--hls-mpegts-offset", "100000"], ["--past-broadcasts", "101"]] {
            #expect(failure(bad) != nil, "accepted \(bad)")
        }
    }

    @Test func everyFlag() throws {
        let options = try parse([
            "--host", "0.0.0.0", "--port", "0", "--model", "/m", "--web-root", "/w",
            "--max-sessions", "12", "--max-frame-bytes", "131072", "--buffer-seconds", "2.5",
            "--outbound-bytes", "65536", "--idle-timeout", "45", "--max-session-seconds", "60",
            "--token", "alpha", "--token", "beta", "--allowed-origin", "https://Example.com",
            "--allowed-origin", "http://localhost:8080", "--cert", "/c.pem", "--key", "/k.pem",
            "--drain-timeout", "0.5", "--workers", "3", "--log-level", "DEBUG", "--event-loop", "Poll",
        ])
        #expect(options.host == "0.0.0.0")
        #expect(options.port == 0)
        #expect(options.modelPath == "/m")
        #expect(options.webRoot == "/w")
        #expect(options.maxSessions == 12)
        #expect(options.limits.maxFrameBytes == 131072)
        #expect(options.limits.bufferSeconds == 2.5)
        #expect(options.limits.outboundBytes == 65536)
        #expect(options.limits.idleTimeoutSeconds == 45)
        #expect(options.limits.maxSessionSeconds == 60)
        #expect(options.tokens == ["alpha", "beta"])
        #expect(options.allowedOrigins == ["https://example.com", "http://localhost:8080"])
        #expect(options.tls == ServerOptions.TLS(certificatePath: "/c.pem", privateKeyPath: "/k.pem"))
        #expect(options.drainTimeout == .milliseconds(500))
        #expect(options.workers == 3)
        #expect(options.logLevel == .debug)
        #expect(options.eventLoop == .poll)
    }

    @Test func equalsSignForm() throws {
        let options = try parse(["--port=9000", "--token=a=b", "--host=::1", "--log-level=warn"])
        #expect(options.port == 9000)
        #expect(options.tokens == ["a=b"])
        #expect(options.host == "::1")
        #expect(options.logLevel == .warning)
    }

    @Test func everyEnvironmentVariable() throws {
        let options = try parse([], [
            "STENO_HOST": "0.0.0.0", "STENO_PORT": "9001", "STENO_MODEL": "/m", "STENO_WEB_ROOT": "/w",
            "STENO_MAX_SESSIONS": "7", "STENO_MAX_FRAME_BYTES": "2048", "STENO_BUFFER_SECONDS": "4",
            "STENO_OUTBOUND_BYTES": "8192", "STENO_IDLE_TIMEOUT": "0", "STENO_MAX_SESSION_SECONDS": "0",
            "STENO_TOKENS": " one, two ,,three ", "STENO_ALLOWED_ORIGINS": "https://a.example,https://b.example",
            "STENO_CERT": "/c", "STENO_KEY": "/k", "STENO_DRAIN_TIMEOUT": "3", "STENO_WORKERS": "5",
            "STENO_LOG_LEVEL": "trace", "UNRELATED": "--port",
        ])
        #expect(options.host == "0.0.0.0")
        #expect(options.port == 9001)
        #expect(options.modelPath == "/m")
        #expect(options.webRoot == "/w")
        #expect(options.maxSessions == 7)
        #expect(options.limits.maxFrameBytes == 2048)
        #expect(options.limits.bufferSeconds == 4)
        #expect(options.limits.outboundBytes == 8192)
        #expect(options.limits.idleTimeoutSeconds == 0)
        #expect(options.limits.maxSessionSeconds == 0)
        #expect(options.tokens == ["one", "two", "three"])
        #expect(options.allowedOrigins == ["https://a.example", "https://b.example"])
        #expect(options.tls == ServerOptions.TLS(certificatePath: "/c", privateKeyPath: "/k"))
        #expect(options.drainTimeout == .seconds(3))
        #expect(options.workers == 5)
        #expect(options.logLevel == .trace)
    }

    @Test func emptyOrBlankVariablesCountAsUnset() throws {
        let options = try parse([], ["STENO_PORT": "", "STENO_HOST": "  ", "STENO_TOKENS": ""])
        #expect(options.port == 8080)
        #expect(options.host == "127.0.0.1")
        #expect(options.tokens == [])
        // Surrounding white space of a variable is not part of the value.
        #expect(try parse([], ["STENO_PORT": " 81\n"]).port == 81)
    }

    /// Two valid values of each option: the first for the environment, the second for the flag.
    private static let pairs: [(String, String, String)] = [
        ("host", "10.0.0.1", "10.0.0.2"), ("port", "1000", "2000"), ("model", "/env", "/flag"),
        ("web-root", "/env", "/flag"), ("max-sessions", "5", "6"), ("max-frame-bytes", "2048", "4096"),
        ("buffer-seconds", "5", "6"), ("outbound-bytes", "8192", "16384"), ("idle-timeout", "5", "6"),
        ("max-session-seconds", "5", "6"), ("resume-seconds", "5", "6"), ("start-timeout", "5", "6"), ("stall-seconds", "5", "6"), ("token", "env", "flag"),
        ("metrics-token", "env", "flag"), ("allowed-origin", "https://env.example", "https://flag.example"), ("trusted-proxy", "10.0.0.5", "fd00::5"),
        ("redis", "redis://10.0.0.7", "redis://10.0.0.8:6380/1"), ("channel-lease", "10", "20"),
        ("max-handshaking-per-address", "8", "0"), ("handshake-memory", "64", "0"),
        ("message-memory", "32", "0"), ("message-memory-per-address", "2", "0"),
        ("drain-timeout", "5", "6"),
        ("keepalive", "5", "6"), ("write-stall-seconds", "5", "6"), ("echo-route", "/env", "/flag"), ("workers", "5", "6"), ("event-loop", "poll", "libuv"), ("recognizers", "5", "6"), ("spare-recognizers", "0", "3"), ("decoder", "-fwdflat no", "-maxwpf 10"), ("endpointing", "detector", "search=0.3"), ("lag-target", "2", "0"), ("admit-utilization", "0.8", "0.95"),
        ("caption-line-length", "30", "32"), ("caption-lines", "1", "3"), ("caption-min-seconds", "0.5", "1.5"),
        ("caption-max-seconds", "5", "6"), ("hls-segment-seconds", "2", "4"), ("hls-window", "5", "6"),
        ("hls-mpegts-offset", "1.4", "10"), ("past-broadcasts", "0", "8"),
        ("log-level", "error", "debug"),
        ("engine", "pocketsphinx", "whisper"), ("whisper-python", "/env/python", "/flag/python"),
        ("whisper-worker", "/env/w.py", "/flag/w.py"), ("whisper-device", "cuda", "cpu"), ("whisper-threads", "1", "2"),
        ("whisper-batch", "2", "8"), ("profanity", "keep", "remove"), ("audio-batch-seconds", "0", "0.064"),
    ]

    @Test(arguments: 0..<pairs.count)
    func theFlagWinsOverTheEnvironment(index: Int) throws {
        let (name, environmentValue, flagValue) = Self.pairs[index]
        let option = try #require(flags.all.first { $0.name == name })
        let variable = try #require(option.environment)
        let both = try parse([option.flag, flagValue], [variable: environmentValue])
        let flagOnly = try parse([option.flag, flagValue])
        let environmentOnly = try parse([], [variable: environmentValue])
        #expect(both == flagOnly)
        #expect(both != environmentOnly)
    }

    @Test func everyFlagHasAVariableAndEveryPairIsTested() {
        let tested = Set(Self.pairs.map(\.0) + ["cert", "key", "viewer-token", "dedicated-recognizers"])
        #expect(Set(flags.all.map(\.name)) == tested)
        for flag in flags.all { #expect(flag.environment != nil, "\(flag.flag)") }
    }

    /// `--endpointing`: the detector's ends, the search's at its measured default silence (the
    /// server's default), or at one given; anything else is a usage error that names what is
    /// expected.
    @Test func endpointingNamesTheDetectorOrTheSearchsSilence() throws {
        #expect(try parse([]).endpointing == .standard)
        #expect(ServeOptions.spec(machine).helpText().contains("default: search"))
        #expect(try parse(["--endpointing", "detector"]).endpointing == .detector)
        #expect(try parse(["--endpointing", "search"]).endpointing == .standard)
        #expect(try parse(["--endpointing", "search=0.3"]).endpointing == Endpointing(lateSilence: 0.3))
        #expect(try parse([], ["STENO_ENDPOINTING": "search"]).endpointing == .standard)
        for bad in ["", "search=", "search=0.05", "search=3", "search=nan", "late", "Search", "search=0.3s"] {
            let problem = failure(["--endpointing", bad]).map { "\($0)" }
            #expect(problem?.contains("search=SECONDS") == true, "\(bad): \(problem ?? "accepted")")
        }
        for endpointing in [Endpointing.detector, .standard, Endpointing(lateSilence: 0.25)] {
            #expect(EndpointingFlag.endpointing(EndpointingFlag.text(endpointing)) == endpointing)
        }
        #expect(ServeOptions.spec(machine).helpText().contains("--endpointing MODE"))
        // It reaches every model's configuration, and without it each has the server's default.
        let models = ["--model", "/m", "--model", "legal=/m,lm=/legal.lm.bin"]
        let given = try Serve.modelConfigurations(parse(models + ["--endpointing", "search=0.3"]))
        #expect(given.count == 2 && given.allSatisfy { $0.endpointing == Endpointing(lateSilence: 0.3) })
        let plain = try Serve.modelConfigurations(parse(models))
        #expect(plain.count == 2 && plain.allSatisfy { $0.endpointing == .standard })
    }

    @Test func decoderOptionsArePairsAfterStenosOwn() throws {
        #expect(try parse([]).decoderArguments == [])
        #expect(try parse(["--decoder", " -fwdflat no\t-vad_postspeech 40 "]).decoderArguments
            == ["-fwdflat", "no", "-vad_postspeech", "40"])
        #expect(try parse([], ["STENO_DECODER": "-maxwpf 10"]).decoderArguments == ["-maxwpf", "10"])
        for bad in ["-fwdflat", "fwdflat no", "- no", "-a 1 -b"] {
            #expect(failure(["--decoder", bad]) != nil, "accepted \(bad)")
        }
        #expect(ServeOptions.spec(machine).helpText().contains("--decoder OPTIONS"))
        // pocketsphinx refuses an option given twice: one Steno sets takes the new value, in place.
        let merged = DecoderFlag.arguments(adding: ["-maxwpf", "10", "-topn", "2", "-topn", "3"])
        let names = stride(from: 0, to: merged.count, by: 2).map { merged[$0] }
        #expect(Set(names).count == names.count, "\(merged)")
        #expect(merged.count == PocketSphinxConfiguration.recommendedArguments.count + 2)
        let value = { (name: String) in names.firstIndex(of: name).map { merged[2 * $0 + 1] } }
        #expect(value("-maxwpf") == "10" && value("-topn") == "3")
        #expect(DecoderFlag.arguments(adding: []) == PocketSphinxConfiguration.recommendedArguments)
    }

    @Test func theEventLoop() throws {
        #expect(try parse([]).eventLoop == nil)  // the transport's default
        #expect(try parse(["--event-loop", "poll"]).eventLoop == .poll)
        #expect(try parse([], ["STENO_EVENT_LOOP": "LibUV"]).eventLoop == .libuv)
        #expect(problem(["--event-loop", "epoll"]) == .invalidValue(
            source: "--event-loop", value: "epoll", expected: "one of libuv, poll"))
    }

    @Test func theTLSFlagsWinOverTheEnvironment() throws {
        let options = try parse(["--cert", "/fc", "--key", "/fk"], ["STENO_CERT": "/ec", "STENO_KEY": "/ek"])
        #expect(options.tls == ServerOptions.TLS(certificatePath: "/fc", privateKeyPath: "/fk"))
        // One from each side is allowed: each option is resolved on its own.
        let mixed = try parse(["--cert", "/fc"], ["STENO_KEY": "/ek"])
        #expect(mixed.tls == ServerOptions.TLS(certificatePath: "/fc", privateKeyPath: "/ek"))
    }

    @Test func aRepeatedFlagTakesTheLastValueAndListsAccumulate() throws {
        let options = try parse(["--port", "1", "--port", "2", "--token", "a", "--token", "b"],
                                ["STENO_TOKENS": "c,d"])
        #expect(options.port == 2)
        #expect(options.tokens == ["a", "b"])
    }

    @Test func severalModelsOnePerFlagAndTheVariableHoldsOne() throws {
        let one = try parse(["--model", "legal=/m,lm=/legal.lm.bin"])
        #expect(one.modelPath == "legal=/m,lm=/legal.lm.bin" && one.models == [])
        let two = try parse(["--model", "/m", "--model", "legal=/m,lm=/legal.lm.bin,dict=/legal.dict"],
                            ["STENO_MODEL": "/env"])
        #expect(two.models == ["/m", "legal=/m,lm=/legal.lm.bin,dict=/legal.dict"])
        #expect(two.modelPath == "/m")
        // A model's spec has commas: the variable is one model, not a list.
        let variable = try parse([], ["STENO_MODEL": "legal=/m,lm=/legal.lm.bin"])
        #expect(variable.modelPath == "legal=/m,lm=/legal.lm.bin" && variable.models == [])
        #expect(problem(["--model", "/m", "--model", ""]) != nil)
        #expect(ServeOptions.spec(machine).helpText().contains("repeatable"))
    }

    @Test func viewerTokensNeedTokensAndComeFromFlagsOrEnvironment() throws {
        let needsToken = UsageError.Problem.requires(
            option: "--viewer-token", other: "--token", reason: "without it anyone could publish while viewers need a token")
        #expect(problem(["--viewer-token", "look"]) == needsToken)
        #expect(problem([], ["STENO_VIEWER_TOKENS": "look"]) == needsToken)
        let options = try parse(["--token", "pub", "--viewer-token", "look", "--viewer-token", "see"])
        #expect(options.tokens == ["pub"] && options.viewerTokens == ["look", "see"])
        let fromEnvironment = try parse([], ["STENO_TOKENS": "pub", "STENO_VIEWER_TOKENS": "look,see"])
        #expect(fromEnvironment.viewerTokens == ["look", "see"])
        #expect(failure(["--token", "pub", "--viewer-token", "b@d token"]) != nil)
        #expect(flags.viewerToken.environment == "STENO_VIEWER_TOKENS")
        #expect(ServeOptions.spec(machine).helpText().contains("--viewer-token TOKEN"))
    }

    @Test func environmentNamesFollowTheFlags() {
        #expect(flags.maxSessionSeconds.environment == "STENO_MAX_SESSION_SECONDS")
        #expect(flags.webRoot.environment == "STENO_WEB_ROOT")
        #expect(flags.token.environment == "STENO_TOKENS")
        #expect(flags.allowedOrigin.environment == "STENO_ALLOWED_ORIGINS")
        #expect(flags.keepAlive.environment == "STENO_KEEPALIVE")
        #expect(flags.viewerToken.environment == "STENO_VIEWER_TOKENS")
    }

    @Test func zeroDisablesTheTimeLimits() throws {
        let options = try parse(["--idle-timeout", "0", "--max-session-seconds", "0", "--drain-timeout", "0"])
        #expect(options.limits.idleTimeoutSeconds == 0)
        #expect(options.limits.maxSessionSeconds == 0)
        #expect(options.drainTimeout == .zero)
        #expect(try parse(["--resume-seconds", "0"]).limits.resumeSeconds == 0)
        #expect(try parse([], ["STENO_RESUME_SECONDS": "12.5"]).limits.resumeSeconds == 12.5)
        #expect(problem(["--resume-seconds", "-1"]) != nil)
        #expect(try parse(["--start-timeout", "0"]).limits.startTimeoutSeconds == 0)
        #expect(try parse([], ["STENO_START_TIMEOUT": "2.5"]).limits.startTimeoutSeconds == 2.5)
        #expect(problem(["--start-timeout", "-1"]) != nil)
        #expect(try parse([]).limits.stallSeconds == 2)
        #expect(try parse(["--stall-seconds", "0"]).limits.stallSeconds == 0)
        #expect(try parse([], ["STENO_STALL_SECONDS": "4"]).limits.stallSeconds == 4)
        #expect(problem(["--stall-seconds", "-1"]) != nil)
        // The switch of the old design, and load admission turned off.
        #expect(try !parse([]).dedicatedRecognizers && parse([]).lagTarget == 1)
        #expect(try parse(["--dedicated-recognizers"]).dedicatedRecognizers)
        #expect(try parse([], ["STENO_DEDICATED_RECOGNIZERS": "1"]).dedicatedRecognizers)
        #expect(problem(["--dedicated-recognizers=yes"]) == .unexpectedValue(option: "--dedicated-recognizers"))
        #expect(try parse(["--lag-target", "0"]).lagTarget == 0)
        #expect(try parse([]).admitUtilization == 0.9)
        #expect(try parse(["--admit-utilization", "0.75"]).admitUtilization == 0.75)
        #expect(try parse([], ["STENO_ADMIT_UTILIZATION": "0"]).admitUtilization == 0)
        #expect(problem(["--admit-utilization", "1.5"]) != nil)
        #expect(problem(["--admit-utilization", "90%"]) != nil)
        #expect(try parse(["--keepalive", "0"]).keepAlive == nil)
        #expect(try parse(["--keepalive", "0.4"]).keepAlive == .seconds(1))
        #expect(try parse([]).writeStall == .seconds(30))
        #expect(try parse(["--write-stall-seconds", "0"]).writeStall == nil)
        #expect(try parse(["--write-stall-seconds", "0.4"]).writeStall == .seconds(1))
        #expect(try parse([], ["STENO_WRITE_STALL_SECONDS": "12"]).writeStall == .seconds(12))
    }

    /// Whisper by default, its worker found beside the program; `--model whisper:` names
    /// another model folder (once), the other `--model`s are pocketsphinx's.
    @Test func whisperIsTheDefaultAndAWhisperModelIsNamedByItsFolder() throws {
        let plain = try parse([])
        #expect(plain.engine == "whisper")
        #expect(plain.whisper.model == nil && plain.whisper.servedName == "whisper-tiny.en")
        #expect(plain.whisper.worker == "scripts/whisper_worker.py" && plain.whisper.python == "./.venv/bin/python")
        let base = try parse(["--model", "whisper:/models/faster-whisper-base.en/", "--model", "/m"])
        #expect(base.whisper.model == "/models/faster-whisper-base.en/")
        #expect(base.whisper.servedName == "faster-whisper-base.en")
        #expect(base.modelPath == "/m" && base.models == [])
        let named = try parse(["--engine", "pocketsphinx", "--model", "whisper:small=/models/small.en"])
        #expect(named.engine == "pocketsphinx" && named.whisper.name == "small" && named.whisper.model == "/models/small.en")
        #expect(named.modelPath == "/models/en-us")
        #expect(problem(["--engine", "vosk"]) == .invalidValue(source: "--engine", value: "vosk",
                                                                expected: "one of whisper, pocketsphinx"))
        #expect(problem(["--model", "whisper:/a", "--model", "whisper:/b"]) != nil)
        #expect(problem(["--model", "whisper:"]) != nil)
    }

    @Test func helpIsRecognisedBeforeAnythingElse() throws {
        #expect(try helpRequested(["--help"]))
        #expect(try helpRequested(["--port", "abc", "-h"]))
        let text = ServeOptions.spec(machine).helpText()
        #expect(text.hasPrefix("Usage: steno serve [options]\n"))
        for option in flags.all {
            #expect(text.contains(option.flag + " "), "help lacks \(option.flag)")
            #expect(text.contains(option.environment ?? "?"), "help lacks \(option.flag)'s variable")
        }
        #expect(text.contains("default: /models/en-us, whisper tiny.en; env STENO_MODEL"))
        #expect(text.contains("default: 14400; env STENO_MAX_SESSION_SECONDS"))
    }

    // MARK: Errors

    @Test func badNumbers() {
        #expect(problem(["--port", "abc"]) == .invalidValue(
            source: "--port", value: "abc", expected: "a whole number from 0 to 65535"))
        #expect(problem(["--port", "-1"]) == .invalidValue(
            source: "--port", value: "-1", expected: "a whole number from 0 to 65535 (not negative)"))
        #expect(failure(["--port", "65536"]) != nil)
        #expect(failure(["--port", "99999999999999999999999"]) != nil)
        #expect(failure(["--port", "8080x"]) != nil)
        #expect(failure(["--port", "+80"]) != nil)
        #expect(failure(["--port", " 80"]) != nil)
        #expect(failure(["--max-sessions", "0"]) != nil)
        #expect(failure(["--workers", "0"]) != nil)
        #expect(failure(["--workers", "1000"]) != nil)
        #expect(failure(["--max-frame-bytes", "10"]) != nil)
        #expect(failure(["--outbound-bytes", "-5"]) != nil)
    }

    @Test func badSeconds() {
        #expect(problem(["--buffer-seconds", "-2"]) == .invalidValue(
            source: "--buffer-seconds", value: "-2",
            expected: "seconds from 0.1 to 3600, such as 30 or 2.5 (not negative)"))
        for bad in ["0", "abc", "1e3", "nan", "inf", "0x10", "1.2.3", ".", "", "5s", "--"] {
            #expect(failure(["--buffer-seconds=\(bad)"]) != nil, "accepted \(bad)")
        }
        #expect(failure(["--idle-timeout", "-1"]) != nil)
        #expect(failure(["--max-session-seconds", "-0.5"]) != nil)
        #expect(failure(["--drain-timeout", "99999"]) != nil)
        #expect((try? parse(["--buffer-seconds", ".5"]))?.limits.bufferSeconds == 0.5)
        #expect((try? parse(["--buffer-seconds", "3."]))?.limits.bufferSeconds == 3)
    }

    @Test func environmentErrorsNameTheVariable() {
        let error = failure([], ["STENO_PORT": "abc"])
        #expect(error?.problem == .invalidValue(
            source: "STENO_PORT (environment)", value: "abc", expected: "a whole number from 0 to 65535"))
        #expect(error?.description
            == "invalid value 'abc' for STENO_PORT (environment): expected a whole number from 0 to 65535")
        #expect(failure([], ["STENO_TOKENS": "good,b@d token"]) != nil)
        // A bad variable is ignored when the flag overrides it.
        #expect(failure(["--port", "1"], ["STENO_PORT": "abc"]) == nil)
    }

    @Test func missingValues() {
        #expect(problem(["--port"]) == .missingValue(option: "--port"))
        #expect(problem(["--port", "--host", "x"]) == .missingValue(option: "--port"))
        #expect(problem(["--token"]) == .missingValue(option: "--token"))
        #expect(failure(["--port"])?.description == "--port needs a value")
        // An explicitly empty value is a value, and a bad one.
        #expect(problem(["--model="]) == .invalidValue(source: "--model", value: "", expected: "a path"))
        #expect(failure(["--host", ""]) != nil)
    }

    @Test func unknownFlagsAndStrayArguments() {
        #expect(problem(["--prot", "1"]) == .unknownOption("--prot", suggestion: "--port"))
        #expect(failure(["--prot", "1"])?.description
            == "unknown option --prot (did you mean --port?); see steno serve --help")
        #expect(problem(["--max-session", "1"]) == .unknownOption("--max-session", suggestion: "--max-sessions"))
        #expect(problem(["--frobnicate"]) == .unknownOption("--frobnicate", suggestion: nil))
        #expect(problem(["-p", "80"]) == .unknownOption("-p", suggestion: nil))
        #expect(problem(["--"]) == .unknownOption("--", suggestion: nil))
        #expect(problem(["--hel"]) == .unknownOption("--hel", suggestion: "--help"))
        #expect(problem(["serve"]) == .unexpectedArgument("serve"))
        #expect(problem(["-"]) == .unexpectedArgument("-"))
        #expect(problem(["--port", "80", "extra"]) == .unexpectedArgument("extra"))
        #expect(failure(["extra"])?.description == "unexpected argument 'extra'; see steno serve --help")
    }

    @Test func tlsNeedsBothFiles() {
        let certificateWithoutKey = UsageError.Problem.requires(
            option: "--cert", other: "--key", reason: "TLS needs the certificate and its private key")
        #expect(problem(["--cert", "/c.pem"]) == certificateWithoutKey)
        #expect(problem(["--key", "/k.pem"]) == .requires(
            option: "--key", other: "--cert", reason: "TLS needs the certificate and its private key"))
        #expect(problem([], ["STENO_CERT": "/c.pem"]) == certificateWithoutKey)
        #expect(failure(["--cert", "/c.pem"])?.description
            == "--cert needs --key as well: TLS needs the certificate and its private key")
    }

    @Test func badTokensOriginsAndLevels() {
        #expect(failure(["--token", "has space"]) != nil)
        #expect(failure(["--token", "a,b"]) != nil)
        #expect(failure(["--token", "tëst"]) != nil)
        #expect(failure(["--token="]) != nil)
        #expect(failure(["--allowed-origin", "example.com"]) != nil)
        #expect(failure(["--allowed-origin", "https://example.com/"]) != nil)
        #expect(failure(["--allowed-origin", "https://"]) != nil)
        #expect(failure(["--allowed-origin", "https://a.example/path"]) != nil)
        #expect(problem(["--log-level", "loud"]) == .invalidValue(
            source: "--log-level", value: "loud", expected: "one of error, warning, info, debug, trace"))
        #expect(failure(["--host", "a b"]) != nil)
    }

    @Test func theRedisURL() throws {
        #expect(try parse([]).redis == nil)
        #expect(try parse(["--redis", "redis://cache:6380/2"]).redis == RedisURL(host: "cache", port: 6380, database: 2))
        #expect(try parse([], ["STENO_REDIS": "redis://10.0.0.7"]).redis == RedisURL(host: "10.0.0.7"))
        #expect(problem(["--redis", "10.0.0.7:6379"]) == .invalidValue(
            source: "--redis", value: "10.0.0.7:6379", expected: "redis://HOST[:PORT][/DB] (it does not start with redis://)"))
        #expect(failure(["--redis", "redis://h:99999"]) != nil)
    }

    @Test func theChannelLeaseAndTheHandshakeLimits() throws {
        let defaults = try parse([])
        #expect(defaults.channelLease == 6)
        #expect(defaults.maxHandshakingPerAddress == 64)
        #expect(defaults.handshakeMemory == 128 << 20)
        #expect(defaults.messageMemory == 64 << 20)
        #expect(defaults.messageMemoryPerAddress == 4 << 20)
        let given = try parse(["--channel-lease", "12", "--max-handshaking-per-address", "0", "--handshake-memory", "32"])
        #expect(given.channelLease == 12)
        #expect(given.maxHandshakingPerAddress == 0)
        #expect(given.handshakeMemory == 32 << 20)
        #expect(failure(["--channel-lease", "0.5"]) != nil)
        #expect(failure(["--handshake-memory", "-1"]) != nil)
        #expect(failure(["--max-handshaking-per-address", "many"]) != nil)
    }

    @Test func trustedProxiesAreIPAddresses() throws {
        #expect(try parse([]).trustedProxies == [])
        #expect(try parse(["--trusted-proxy", "10.0.0.2", "--trusted-proxy", "::1"]).trustedProxies == ["10.0.0.2", "::1"])
        #expect(try parse([], ["STENO_TRUSTED_PROXIES": "10.0.0.2, 10.0.0.3"]).trustedProxies == ["10.0.0.2", "10.0.0.3"])
        for bad in ["proxy.example", "10.0.0", "10.0.0.2/24", "10.0.0.256", ""] {
            #expect(problem(["--trusted-proxy", bad]) == .invalidValue(
                source: "--trusted-proxy", value: bad, expected: "an IP address, such as 10.0.0.2 or fd00::2"), "\(bad)")
        }
    }

    // MARK: Defaults

    @Test func theRecognizersFollowCoresAndMemory() {
        func defaults(cores: Int, gigabytes: UInt64) -> MachineDefaults {
            MachineDefaults(cores: cores, physicalMemory: gigabytes << 30, modelPath: "", webRoot: "")
        }
        #expect(defaults(cores: 2, gigabytes: 24).hardware.recognizers == 16)  // the cores are the limit
        #expect(defaults(cores: 64, gigabytes: 8).hardware.recognizers == 40)  // memory is: 4 GiB / 100 MiB
        #expect(defaults(cores: 2, gigabytes: 2).hardware.recognizers == 10)  // a small machine: 1 GiB / 100 MiB
        #expect(defaults(cores: 1, gigabytes: 0).hardware.recognizers == 2)  // never below two
        // All of them made at start unless --spare-recognizers says how many.
        #expect(ServeOptions.defaults(defaults(cores: 2, gigabytes: 24)).spareRecognizers == nil)
        // Connections are light: their limit does not depend on the machine.
        #expect(ServeOptions.defaults(defaults(cores: 1, gigabytes: 0)).maxSessions == 10_000)
        #expect(MachineDefaults(cores: 0, physicalMemory: 0, modelPath: "", webRoot: "").hardware.cores == 1)
    }

    @Test func theWebRootIsLookedForNearTheProgram() {
        let exe = "/home/u/steno/.build/x86_64-unknown-linux-gnu/debug/steno"
        let source = "/build/steno/Sources/steno/Serve/MachineDefaults.swift"
        func find(_ existing: Set<String>, executable: String? = exe) -> String {
            MachineDefaults.findWebRoot(
                currentDirectory: "/work", executablePath: executable, sourceFile: source,
                isDirectory: { existing.contains($0) })
        }
        #expect(find(["/work/web-client", "/home/u/steno/web-client"]) == "/work/web-client")
        #expect(find(["/home/u/steno/web-client"]) == "/home/u/steno/web-client")
        #expect(find(["/opt/share/steno/web-client"], executable: "/opt/bin/steno") == "/opt/share/steno/web-client")
        #expect(find(["/build/steno/web-client"]) == "/build/steno/web-client")
        #expect(find(["/build/steno/web-client"], executable: nil) == "/build/steno/web-client")
        #expect(find([]) == "/work/web-client")
        #expect(find([], executable: "steno") == "/work/web-client")
    }

    @Test func detectingTheMachineGivesUsableDefaults() {
        let detected = MachineDefaults.detect()
        #expect(detected.hardware.cores >= 1)
        #expect(detected.hardware.recognizers >= 2)
        #expect(detected.webRoot.hasSuffix("web-client"))
        #expect(detected.modelPath == "/usr/share/pocketsphinx/model/en-us")
    }
}
