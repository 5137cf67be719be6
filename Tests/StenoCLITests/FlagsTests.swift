import Testing
@testable import steno

/// The flag parser every command shares (serve's own rules are in ServeOptionsTests).
@Suite struct FlagsTests {
    static let level = Flag("level", value: "N", help: "a number", default: "3", environment: "STENO_LEVEL")
    static let name = Flag("name", value: "NAME", help: "repeatable", environment: "STENO_NAMES", repeatable: true)
    static let fast = Flag.toggle("fast", help: "a switch", environment: "STENO_FAST")
    static let spec = CommandSpec(command: "steno demo", arguments: "[INPUT]", maxArguments: 1,
                                  summary: "A demo.", flags: [level, name, fast], epilogue: "Exit codes: none.")

    func parse(_ arguments: [String], _ environment: [String: String] = [:]) throws -> ParsedCommandLine {
        try Self.spec.parse(arguments, environment: environment)
    }

    func problem(_ arguments: [String], _ environment: [String: String] = [:]) -> UsageError.Problem? {
        do {
            _ = try Self.spec.parse(arguments, environment: environment)
            return nil
        } catch {
            return error.problem
        }
    }

    @Test func valuesSwitchesAndArguments() throws {
        let given = try parse(["-", "--level=4", "--fast", "--name", "a", "--name=b"])
        #expect(given.arguments == ["-"])
        #expect(given.single(Self.level) == FlagValue(text: "4", source: "--level"))
        #expect(given.isOn(Self.fast))
        #expect(given.list(Self.name).map(\.text) == ["a", "b"])
        #expect(!given.helpRequested)
        // A value may itself start with a single dash.
        #expect(try parse(["--name", "-x"]).list(Self.name).map(\.text) == ["-x"])
    }

    @Test func theEnvironmentIsTheFallback() throws {
        let environment = ["STENO_LEVEL": " 7 ", "STENO_NAMES": "a, b,,c", "STENO_FAST": "yes"]
        let given = try parse([], environment)
        #expect(given.single(Self.level) == FlagValue(text: "7", source: "STENO_LEVEL (environment)"))
        #expect(given.list(Self.name).map(\.text) == ["a", "b", "c"])
        #expect(given.isOn(Self.fast))
        #expect(!given.wasGiven(Self.fast))
        #expect(try !parse([], ["STENO_FAST": "0"]).isOn(Self.fast))
        let flagWins = try parse(["--level", "1", "--name", "z"], environment)
        #expect(flagWins.single(Self.level)?.text == "1")
        #expect(flagWins.list(Self.name).map(\.text) == ["z"])
    }

    @Test func problemsAreTyped() {
        #expect(problem(["--fast=1"]) == .unexpectedValue(option: "--fast"))
        #expect(problem(["a", "b"]) == .unexpectedArgument("b"))
        #expect(problem(["--level"]) == .missingValue(option: "--level"))
        #expect(problem(["--level", "--fast"]) == .missingValue(option: "--level"))
        #expect(problem(["--lvel", "1"]) == .unknownOption("--lvel", suggestion: "--level"))
        #expect(problem(["-x"]) == .unknownOption("-x", suggestion: nil))
        #expect(problem(["--fast", "--bogus", "-h"]) == nil)  // help wins
    }

    @Test func typedValuesSayWhatIsExpected() throws {
        let given = try parse([])
        let value = FlagValue(text: "x", source: "--level")
        #expect(throws: UsageError(.invalidValue(source: "--level", value: "x", expected: "a whole number from 1 to 9"),
                                   command: "steno demo")) {
            try given.integer(value, in: 1...9)
        }
        #expect(try given.choice(FlagValue(text: "srt", source: "--format"), ["text", "srt"]) == "srt")
        #expect(throws: UsageError.self) { try given.choice(FlagValue(text: "mp3", source: "--format"), ["text"]) }
        #expect(try given.logLevel(FlagValue(text: "WARN", source: "--log-level")) == .warning)
        #expect(try given.seconds(FlagValue(text: "2.5", source: "--t"), in: 0...10) == 2.5)
    }

    @Test func helpShowsUsageDefaultsVariablesAndEpilogue() {
        let text = Self.spec.helpText()
        #expect(text.hasPrefix("Usage: steno demo [INPUT] [options]\n\nA demo.\n"))
        #expect(text.contains("  --level N"))
        #expect(text.contains("default: 3; env STENO_LEVEL"))
        #expect(text.contains("  --fast "))
        #expect(text.contains("env STENO_FAST"))
        #expect(text.contains("  -h, --help"))
        #expect(text.hasSuffix("Exit codes: none.\n"))
    }
}

/// `steno transcribe`'s flags on the shared parser: the same flags as before it.
@Suite struct TranscribeOptionsTests {
    @Test func defaultsAndEveryFlag() throws {
        let plain = try #require(try Transcribe.parse(["a.wav"]))
        #expect(plain.file == "a.wav" && plain.format == .text && plain.chunkMilliseconds == 100)
        #expect(plain.maxUtterance == 15 && plain.words && plain.progress)
        let all = try #require(try Transcribe.parse([
            "--format", "jsonl", "--model=/m", "--chunk-ms", "20", "--max-utterance", "7.5", "--no-words",
            "--no-progress", "b.wav",
        ]))
        #expect(all.file == "b.wav" && all.format == .jsonl && all.model == "/m" && all.chunkMilliseconds == 20)
        #expect(all.maxUtterance == 7.5 && !all.words && !all.progress)
        #expect(try Transcribe.parse(["--help"]) == nil)
    }

    @Test func badCommandLines() {
        func problem(_ arguments: [String]) -> UsageError.Problem? {
            do {
                _ = try Transcribe.parse(arguments)
                return nil
            } catch {
                return error.problem
            }
        }
        #expect(problem([]) == .missingArgument("FILE"))
        #expect(problem(["a.wav", "b.wav"]) == .unexpectedArgument("b.wav"))
        #expect(problem(["a.wav", "--chunk-ms", "0"]) != nil)
        #expect(problem(["a.wav", "--format", "mp3"]) == .invalidValue(
            source: "--format", value: "mp3", expected: "one of text, jsonl, vtt, srt, scc, ttml"))
    }
}
