import StenoCore
import StenoRedis
import StenoServer
import Testing
import StenoSpeech
@testable import steno

let machine = MachineDefaults(
    cores: 2, physicalMemory: 8 << 30, modelPath: "/models/en-us", webRoot: "/srv/web-client")

func parse(_ arguments: [String], _ environment: [String: String] = [:]) throws -> ServerOptions {
    try #require(try ServeOptions.parse(arguments, environment: environment, machine: machine))
}

private func helpRequested(_ arguments: [String]) throws -> Bool {
    try ServeOptions.parse(arguments, environment: [:], machine: machine) == nil
}

let flags = ServeOptions.Flags(machine)

/// The flag `--NAME` of `steno serve`.
func flag(_ name: String) -> Flag? { flags.all.first { $0.name == name } }

/// The error parsing throws, or nil if it succeeds.
func failure(_ arguments: [String], _ environment: [String: String] = [:]) -> UsageError? {
    do {
        _ = try ServeOptions.parse(arguments, environment: environment, machine: machine)
        return nil
    } catch {
        return error
    }
}

/// The problem of the error parsing throws, or nil if it succeeds.
func problem(_ arguments: [String], _ environment: [String: String] = [:]) -> UsageError.Problem? {
    failure(arguments, environment)?.problem
}

/// `steno serve`'s options: the defaults, every flag and its variable, which wins, help, and the
/// machine's defaults. The helpers above are shared with ServeOptionsSettingsTests.swift (each
/// option's values) and ServeOptionsErrorTests.swift (usage errors).
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
        ("keepalive", "5", "6"), ("write-stall-seconds", "5", "6"), ("workers", "5", "6"), ("event-loop", "poll", "libuv"), ("recognizers", "5", "6"), ("spare-recognizers", "0", "3"), ("decoder", "-fwdflat no", "-maxwpf 10"), ("endpointing", "detector", "search=0.3"), ("lag-target", "2", "0"), ("admit-utilization", "0.8", "0.95"),
        ("caption-line-length", "30", "32"), ("caption-lines", "1", "3"), ("caption-min-seconds", "0.5", "1.5"),
        ("caption-max-seconds", "5", "6"), ("hls-segment-seconds", "2", "4"), ("hls-window", "5", "6"),
        ("hls-mpegts-offset", "1.4", "10"), ("past-broadcasts", "0", "8"),
        ("log-level", "error", "debug"),
        ("engine", "pocketsphinx", "whisper"), ("whisper-python", "/env/python", "/flag/python"),
        ("whisper-worker", "/env/w.py", "/flag/w.py"), ("whisper-multilingual", "/env/base", "none"),
        ("whisper-device", "cuda", "cpu"), ("whisper-threads", "1", "2"),
        ("whisper-batch", "2", "8"), ("speech-detector", "energy", "silero"), ("profanity", "keep", "remove"),
        ("audio-batch-seconds", "0", "0.064"),
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
        let tested = Set(Self.pairs.map(\.0) + ["cert", "key", "viewer-token"])
        #expect(Set(flags.all.map(\.name)) == tested)
        for flag in flags.all { #expect(flag.environment != nil, "\(flag.flag)") }
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

    @Test func environmentNamesFollowTheFlags() {
        #expect(flag("max-session-seconds")?.environment == "STENO_MAX_SESSION_SECONDS")
        #expect(flag("web-root")?.environment == "STENO_WEB_ROOT")
        #expect(flag("token")?.environment == "STENO_TOKENS")
        #expect(flag("allowed-origin")?.environment == "STENO_ALLOWED_ORIGINS")
        #expect(flag("keepalive")?.environment == "STENO_KEEPALIVE")
        #expect(flag("viewer-token")?.environment == "STENO_VIEWER_TOKENS")
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
