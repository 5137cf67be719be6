import StenoCore
import StenoTransport
import Testing
@testable import steno

/// `steno send`'s and `steno listen`'s command lines: inputs, defaults, the `start` they make,
/// what they refuse.
@Suite struct ClientCommandLineTests {
    func send(_ arguments: [String], _ environment: [String: String] = [:]) throws -> SendOptions {
        try #require(try SendOptions.parse(arguments, environment: environment))
    }

    func sendProblem(_ arguments: [String]) -> UsageError.Problem? {
        do {
            _ = try SendOptions.parse(arguments, environment: [:])
            return nil
        } catch {
            return error.problem
        }
    }

    @Test func sendInputsAndDefaults() throws {
        let file = try send(["talk.wav"])
        #expect(file.input == .file("talk.wav") && file.encoding == .opus && !file.fast && file.bufferSeconds == 60)
        #expect(file.client.server == WebSocketURL("ws://127.0.0.1:8080") && file.client.format == .text)
        #expect(file.client.url("/v1/stream").description == "ws://127.0.0.1:8080/v1/stream")
        #expect(file.text == .readable)
        #expect(try send(["a.wav", "--text", "raw"]).text == .raw)
        let raw = try send(["-", "--raw-rate", "48000", "--raw-channels=2", "--raw-format", "f32le", "--encoding", "pcm"])
        #expect(raw.input == .standardInput(raw: RawPCMFormat(sampleRate: 48000, channels: 2, sample: .f32le)))
        #expect(try send(["-"]).input == .standardInput(raw: nil))
        let device = try send(["--device", "hw:1", "--rate", "48000", "--channel", "studio-a", "--fast"])
        #expect(device.input == .device(name: "hw:1", sampleRate: 48000, channels: 1) && device.channel == "studio-a")
        #expect(try send(["--list-devices"]).listDevices)
        let phrases = try send(["talk.wav", "--phrases", "names.txt", "--boost", "0.5"])
        #expect(phrases.phrasesFile == "names.txt" && phrases.boost == 0.5)
        #expect(try send(["talk.wav"]).phrasesFile == nil)
        let environment = try send(["a.wav"], ["STENO_SERVER": "wss://captions.example/steno/", "STENO_TOKEN": "t0k",
                                               "STENO_CA": "/ca.pem"])
        #expect(environment.client.token == "t0k" && environment.client.caFile == "/ca.pem")
        #expect(environment.client.url("/v1/listen?channel=x").description == "wss://captions.example/steno/v1/listen?channel=x")
        let retries = try send(["a.wav", "--retry-for", "5", "--retry-max", "0.5", "--format", "srt", "--log-level", "warn"])
        #expect(retries.client.reconnection.giveUpAfter == 5 && retries.client.reconnection.maxDelay == 0.5)
        #expect(retries.client.format == .srt && retries.client.logLevel == .warning)
    }

    /// `--profanity` goes into the `start` a new session is opened with; without it the start
    /// says nothing and the server's default applies.
    @Test func sendsProfanityChoiceIsInItsStart() throws {
        let audio = try AudioFormat(encoding: .opus, sampleRate: 48000, channels: 1)
        for mode in ProfanityMode.allCases {
            let options = try send(["talk.wav", "--profanity", mode.rawValue, "--language", "en-GB", "--text", "raw"])
            #expect(options.profanity == mode)
            let start = options.startText(audio)
            #expect(start.contains(#""profanity":"\#(mode.rawValue)""#), "\(start)")
            guard case .start(let request) = try ClientMessage.parse(start) else {
                Issue.record("not a start: \(start)")
                continue
            }
            #expect(request.profanity == mode && request.language == "en-GB" && request.format == .raw)
        }
        let plain = try send(["talk.wav"])
        #expect(plain.profanity == nil && !plain.startText(audio).contains("profanity"))
        guard case .start(let request) = try ClientMessage.parse(plain.startText(audio)) else { return }
        #expect(request.profanity == nil && request.model == nil)
        // `--model` names the server's model (1-64 characters, as `start` takes it).
        guard case .start(let chosen) = try ClientMessage.parse(try send(["talk.wav", "--model", "en-us"]).startText(audio)) else { return }
        #expect(chosen.model == "en-us")
        #expect(sendProblem(["talk.wav", "--model", ""]) != nil && sendProblem(["talk.wav", "--model", String(repeating: "m", count: 65)]) != nil)
    }

    @Test func sendRefusesWhatDoesNotFit() {
        #expect(sendProblem([]) == .missingArgument("INPUT (a WAV file, or - for standard input) or --device"))
        #expect(sendProblem(["a.wav", "--device", "hw:0"]) == .conflict("INPUT", "--device"))
        #expect(sendProblem(["a.wav", "--raw-rate", "16000"]) != nil)
        #expect(sendProblem(["-", "--raw-format", "s16le"]) != nil)  // raw needs its rate
        #expect(sendProblem(["-", "--raw-rate", "96000"]) != nil)
        #expect(sendProblem(["a.wav", "--rate", "16000"]) != nil)
        #expect(sendProblem(["a.wav", "--server", "http://x"]) != nil)
        #expect(sendProblem(["a.wav", "--ca", "/c.pem"]) != nil)  // not wss
        #expect(sendProblem(["a.wav", "--channel", "no spaces"]) != nil)
        #expect(sendProblem(["a.wav", "--encoding", "mp3"]) != nil)
        #expect(sendProblem(["a.wav", "b.wav"]) == .unexpectedArgument("b.wav"))
        #expect(sendProblem(["a.wav", "--boost", "2"]) == .requires(option: "--boost", other: "--phrases", reason: "it scales the phrases"))
        #expect(sendProblem(["a.wav", "--phrases", "p.txt", "--boost", "0"]) != nil)
        #expect(sendProblem(["a.wav", "--fats"]) == .unknownOption("--fats", suggestion: "--fast"))
        #expect(sendProblem(["a.wav", "--profanity", "bleep"]) != nil)
    }

    @Test func listenNeedsAChannel() throws {
        let options = try #require(try ListenOptions.parse(["--channel", "room-1", "--format", "jsonl"], environment: [:]))
        #expect(options.channel == "room-1" && options.client.format == .jsonl)
        #expect(throws: UsageError.self) { try ListenOptions.parse([], environment: [:]) }
        #expect(throws: UsageError.self) { try ListenOptions.parse(["--channel", ".."], environment: [:]) }
        #expect(throws: UsageError.self) { try ListenOptions.parse(["--channel", "a", "extra"], environment: [:]) }
        #expect(ListenOptions.spec.helpText().contains("Exit codes: 0 done"))
        // A language to follow: a tag or "original", nothing else.
        #expect(try ListenOptions.parse(["--channel", "a", "--language", "it"], environment: [:])?.language == "it")
        #expect(try ListenOptions.parse(["--channel", "a", "--language", "original"], environment: [:])?.language == "original")
        #expect(try ListenOptions.parse(["--channel", "a"], environment: [:])?.language == nil)
        #expect(throws: UsageError.self) { try ListenOptions.parse(["--channel", "a", "--language", "not a tag"], environment: [:]) }
    }
}
