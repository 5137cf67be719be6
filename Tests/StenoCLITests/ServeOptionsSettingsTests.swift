import StenoCore
import StenoRedis
import StenoServer
import StenoSpeech
import Testing
@testable import steno

/// ServeOptionsTests (its helpers are in ServeOptionsTests.swift): the values each option takes,
/// from captions and endpointing to Redis and trusted proxies.
extension ServeOptionsTests {
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
        #expect(flag("viewer-token")?.environment == "STENO_VIEWER_TOKENS")
        #expect(ServeOptions.spec(machine).helpText().contains("--viewer-token TOKEN"))
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
        // Load admission turned off.
        #expect(try parse([]).lagTarget == 1)
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

    /// Whisper by default, its worker found beside the program, with tiny.en and the
    /// multilingual model of the `.venv` (when installed); `--model whisper:` names the model
    /// folders instead (each once), the other `--model`s are pocketsphinx's.
    @Test func whisperIsTheDefaultAndAWhisperModelIsNamedByItsFolder() throws {
        let plain = try parse([])
        #expect(plain.engine == "whisper")
        #expect(plain.whisper.models == [] && plain.whisper.multilingual == "./.venv/models/whisper-base")
        #expect(plain.whisper.served(multilingualInstalled: false).map(\.servedName) == ["whisper-tiny.en"])
        #expect(plain.whisper.served(multilingualInstalled: true).map(\.servedName) == ["whisper-tiny.en", "whisper-base"])
        #expect(try parse(["--whisper-multilingual", "none"]).whisper.served(multilingualInstalled: true).count == 1)
        #expect(try parse(["--whisper-multilingual", "/opt/base"]).whisper.multilingual == "/opt/base")
        #expect(plain.whisper.worker == "scripts/whisper_worker.py" && plain.whisper.python == "./.venv/bin/python")
        let base = try parse(["--model", "whisper:/models/faster-whisper-base.en/", "--model", "/m"])
        #expect(base.whisper.models == [WhisperModelChoice(directory: "/models/faster-whisper-base.en/")])
        #expect(base.whisper.served(multilingualInstalled: true).map(\.servedName) == ["faster-whisper-base.en"])
        #expect(base.modelPath == "/m" && base.models == [])
        let named = try parse(["--engine", "pocketsphinx", "--model", "whisper:small=/models/small.en", "--model", "whisper:/models/base"])
        #expect(named.engine == "pocketsphinx")
        #expect(named.whisper.models == [WhisperModelChoice(directory: "/models/small.en", name: "small"),
                                         WhisperModelChoice(directory: "/models/base")])
        #expect(named.modelPath == "/models/en-us")
        #expect(problem(["--engine", "vosk"]) == .invalidValue(source: "--engine", value: "vosk",
                                                                expected: "one of whisper, pocketsphinx"))
        #expect(problem(["--model", "whisper:/a/m", "--model", "whisper:/b/m"]) != nil, "two of one name")
        #expect(problem(["--model", "whisper:"]) != nil)
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
}
