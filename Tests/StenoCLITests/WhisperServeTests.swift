import Foundation
import StenoAudio
import StenoCore
import StenoTestSupport
import Testing

/// `steno serve` with its defaults — the Whisper engine in its worker process — captioning
/// read speech sent by `steno send` at real time over a real socket: words against the
/// reading's text, volatiles before finals, the worker killed mid-utterance losing nothing.
/// Each test has a server of its own (≈ 1 s to load the model), stopped when it ends.
@Suite(.serialized) struct WhisperServeTests {
    /// `steno serve` with its defaults but for the multilingual model (MultilingualServeTests
    /// has it), for `body`; SIGTERM after.
    static func withServer(_ body: (ServeProcess) throws -> Void) throws {
        let server = try ServeProcess(engine: nil, arguments: ["--whisper-multilingual", "none"])
        defer { _ = try? server.terminate() }
        try body(server)
    }

    static let librivox = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-"
    static let reference = ("he was not an ill disposed young man "
                            + "he might even have been made amiable himself "
                            + "unless to be rather cold hearted and rather selfish is to be ill disposed")
        .split(separator: " ").map(String.init)

    /// The three sentences with a second of silence before each (≈ 14 s), as a WAV file.
    static let reading: Result<(path: String, seconds: Double), any Error> = Result {
        var samples: [Float] = []
        for name in ["0880", "0930", "0890"] {
            samples += [Float](repeating: 0, count: 16_000) + (try WAVFile(path: librivox + name + ".wav").mono)
        }
        samples += [Float](repeating: 0, count: 16_000)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("steno-reading-\(getpid()).wav").path
        try WAVFile(sampleRate: 16_000, channels: 1, samples: samples).write(path: path)
        return (path, Double(samples.count) / 16_000)
    }

    /// The events `steno send --format jsonl` printed.
    static func events(_ text: String) -> [JSONObject] {
        text.split(separator: "\n").compactMap { line -> JSONObject? in
            guard case .object(let o)? = try? JSONParser().parse(String(line)) else { return nil }
            return o
        }
    }

    static func words(ofFinals events: [JSONObject]) -> [String] {
        events.filter { $0["type"] == .string("final") }.flatMap { e -> [String] in
            guard case .string(let text)? = e["text"] else { return [] }
            return text.lowercased().split { !($0.isLetter || $0 == "'") }.map(String.init)
        }
    }

    /// The Whisper worker processes `steno serve` started (its children running whisper_worker.py).
    static func workers(of parent: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 2, pid_t(fields[1]) == parent,
                  let command = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"),
                  String(decoding: command, as: UTF8.self).contains("whisper_worker.py") else { return nil }
            return pid
        }
    }

    @Test func theDefaultEngineIsWhisperAndReadyzAndModelsSaySo() throws {
        try Self.withServer { server in
        let ready = try HTTPTestClient.get(port: server.port, "/readyz")
        #expect(ready.status == 200)
        let models = try HTTPTestClient.get(port: server.port, "/v1/models").bodyText
        // Whisper first (the default), pocketsphinx beside it.
        let whisper = try #require(models.range(of: #""engine":"whisper""#))
        let pocketsphinx = try #require(models.range(of: #""engine":"pocketsphinx""#))
        #expect(whisper.lowerBound < pocketsphinx.lowerBound)
        #expect(models.contains(#""name":"whisper-tiny.en""#))
        #expect(Self.workers(of: server.command.pid).count == 1)
        // The worker in /metrics: ready, never restarted, nothing pending, its CPU counted.
        let metrics = try HTTPTestClient.get(port: server.port, "/metrics").bodyText
        #expect(metrics.contains("\nsteno_engine_worker_ready 1\n"))
        #expect(metrics.contains("\nsteno_engine_worker_restarts_total 0\n"))
        #expect(metrics.contains("\nsteno_engine_worker_pending 0\n"))
        let cpu = metrics.firstMatch(of: /\nsteno_engine_worker_cpu_seconds ([0-9.e+-]+)\n/).flatMap { Double($0.1) }
        #expect((cpu ?? 0) > 0, "\(metrics)")
        // `steno send --model` picks the other one by its name; a name the server lacks is
        // refused before any audio, with the names there are, and exit status 3.
        let other = try StenoCommand.run(["send", TestAudio.beckett, "--server", server.url, "--model", "en-us", "--fast",
                                          "--format", "jsonl"], timeout: 60)
        #expect(other.status == 0, "\(other.stderr)")
        #expect(other.stdout.contains(#""engine":{"name":"pocketsphinx","model":"en-us""#), "\(other.stdout)")
        let unknown = try StenoCommand.run(["send", TestAudio.beckett, "--server", server.url, "--model", "nosuch", "--fast"],
                                           timeout: 60)
        #expect(unknown.status == 3)
        #expect(unknown.stderr.contains(#"did not start the session: bad_message: model "nosuch" is not available; this server has whisper-tiny.en, en-us"#),
                "\(unknown.stderr)")
        }
    }

    @Test func aReadingSentAtRealTimeIsCaptionedWordForWord() throws {
        try Self.withServer { server in
        let (path, seconds) = try Self.reading.get()
        let sent = try StenoCommand.run(["send", path, "--server", server.url, "--format", "jsonl"], timeout: 120)
        #expect(sent.status == 0, "\(sent.stderr)")
        let events = Self.events(sent.stdout)
        let ready = try #require(events.first { $0["type"] == .string("ready") })
        guard case .object(let engine)? = ready["engine"] else { Issue.record("ready has no engine"); return }
        #expect(engine["name"] == .string("whisper"))
        let heard = Self.words(ofFinals: events)
        #expect(wordErrorRate(heard, Self.reference) <= 0.15, "heard: \(heard)")
        #expect(events.contains { $0["type"] == .string("volatile") })
        // Finals in order, never overlapping, on the audio's timeline; written as Whisper writes.
        var last = 0.0
        var texts: [String] = []
        for final in events where final["type"] == .string("final") {
            guard case .number(let start)? = final["start"], case .number(let end)? = final["end"],
                  case .string(let text)? = final["text"] else { Issue.record("a final without its range"); continue }
            #expect(start >= last && end >= start && end <= seconds + 0.01)
            last = end
            texts.append(text)
        }
        #expect(texts.first?.first?.isUppercase == true, "\(texts)")
        }
    }

    @Test func theWorkerKilledMidUtteranceCostsNoCaption() throws {
        try Self.withServer { server in
        let (path, _) = try Self.reading.get()
        let before = Self.workers(of: server.command.pid)
        #expect(before.count == 1)
        let send = try StenoCommand(["send", path, "--server", server.url, "--format", "jsonl"])
        // Killed during the first sentence (it is spoken from 1 s to 3.4 s).
        Thread.sleep(forTimeInterval: 2.5)
        for pid in before { kill(pid, SIGKILL) }
        #expect(try send.finish(timeout: 120) == 0, "\(send.stderr.text)")
        let heard = Self.words(ofFinals: Self.events(send.stdout.text))
        #expect(wordErrorRate(heard, Self.reference) <= 0.15, "heard: \(heard)")
        // Another worker serves now, and the server is ready again.
        let after = Self.workers(of: server.command.pid)
        #expect(after.count == 1 && after != before)
        #expect(try HTTPTestClient.get(port: server.port, "/readyz").status == 200)
        // SIGTERM drains and ends the worker with the server.
        #expect(try server.terminate() == 0)
        var alive = after
        for _ in 0..<100 where !alive.isEmpty {
            Thread.sleep(forTimeInterval: 0.05)
            alive = alive.filter { kill($0, 0) == 0 && !((try? String(contentsOfFile: "/proc/\($0)/stat", encoding: .utf8))?.contains(") Z ") ?? true) }
        }
        #expect(alive.isEmpty, "the worker outlived the server")
        }
    }

    @Test func transcribeTakesTheSameEngine() throws {
        let result = try StenoCommand.run(["transcribe", TestAudio.beckett, "--engine", "whisper", "--text", "raw", "--no-progress"])
        #expect(result.status == 0, "\(result.stderr)")
        let heard = result.stdout.split(separator: "\n").flatMap { line in
            line.split(separator: "]", maxSplits: 1).last.map { $0.split(separator: " ").map(String.init) } ?? []
        }
        let reference = "ever tried ever failed no matter try again fail again fail better".split(separator: " ").map(String.init)
        #expect(wordErrorRate(heard, reference) <= 0.1, "heard: \(heard)")
    }

    /// Whisper's finals carry the alternatives asked for, through the session's transcript
    /// (the final's own text first, score 0; the others scored below it), as pocketsphinx's do.
    /// (Beckett's two-word utterances have none: their hypotheses differ only in punctuation.)
    @Test func finalsCarryTheAlternativesAskedFor() throws {
        let result = try StenoCommand.run(["transcribe", try Self.reading.get().path, "--engine", "whisper", "--alternatives", "3",
                                           "--format", "jsonl", "--no-progress"])
        #expect(result.status == 0, "\(result.stderr)")
        let finals = Self.events(result.stdout).filter { $0["type"] == .string("final") }
        #expect(!finals.isEmpty)
        var several = false
        for final in finals {
            guard case .array(let alternatives)? = final["alternatives"], case .object(let first)? = alternatives.first else {
                Issue.record("no alternatives in \(final)")
                continue
            }
            #expect((1...3).contains(alternatives.count))
            #expect(first["text"] == final["text"] && first["score"] == .number(0))
            for case .object(let other) in alternatives.dropFirst() {
                guard case .number(let score)? = other["score"] else { continue }
                #expect(score <= 0)
            }
            several = several || alternatives.count > 1
        }
        #expect(several, "\(result.stdout)")
    }
}
