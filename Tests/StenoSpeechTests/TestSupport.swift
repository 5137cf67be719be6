import Foundation
import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

/// A 16-bit PCM mono WAV file from the test resources.
struct TestAudio: Sendable {
    let name: String
    let samples: [Int16]
    let sampleRate: Int

    var duration: Double { Double(samples.count) / Double(sampleRate) }

    /// `name` is a path inside Resources, e.g. "cards/001.wav".
    static func load(_ name: String) throws -> TestAudio {
        let url = try resourceURL(name)
        let data = try Data(contentsOf: url)
        let (rate, samples) = try parseWAV(data)
        return TestAudio(name: name, samples: samples, sampleRate: rate)
    }

    static func resourceURL(_ name: String) throws -> URL {
        let base = Bundle.module.bundleURL
        let url = base.appendingPathComponent("Resources").appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: url.path) else { throw TestDataError("missing resource \(name)") }
        return url
    }

    /// Reads RIFF/WAVE with a PCM `fmt ` chunk (16-bit, mono) and a `data` chunk.
    static func parseWAV(_ data: Data) throws -> (Int, [Int16]) {
        let bytes = [UInt8](data)
        func u32(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24 }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        guard bytes.count >= 12, bytes[0..<4] == [0x52, 0x49, 0x46, 0x46], bytes[8..<12] == [0x57, 0x41, 0x56, 0x45] else {
            throw TestDataError("not a RIFF/WAVE file")
        }
        var offset = 12
        var rate: Int?
        while offset + 8 <= bytes.count {
            let id = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
            let size = u32(offset + 4)
            let body = offset + 8
            guard body + size <= bytes.count else { throw TestDataError("truncated \(id) chunk") }
            if id == "fmt " {
                guard size >= 16, u16(body) == 1, u16(body + 2) == 1, u16(body + 14) == 16 else {
                    throw TestDataError("only 16-bit PCM mono is supported")
                }
                rate = u32(body + 4)
            } else if id == "data" {
                guard let rate else { throw TestDataError("data before fmt") }
                var samples = [Int16](repeating: 0, count: size / 2)
                for index in samples.indices {
                    samples[index] = Int16(bitPattern: UInt16(bytes[body + 2 * index]) | UInt16(bytes[body + 2 * index + 1]) << 8)
                }
                return (rate, samples)
            }
            offset = body + size + (size & 1)
        }
        throw TestDataError("no data chunk")
    }

    /// The samples as floats in -1...1 (the /32768 scaling StenoAudio uses for 16-bit PCM).
    var floats: [Float] { samples.map { Float($0) / 32768 } }

    /// This audio after `seconds` of digital silence.
    func afterSilence(samples count: Int) -> TestAudio {
        TestAudio(name: "\(count) zeros + \(name)", samples: [Int16](repeating: 0, count: count) + samples, sampleRate: sampleRate)
    }

    func appending(_ other: TestAudio) -> TestAudio {
        TestAudio(name: "\(name) + \(other.name)", samples: samples + other.samples, sampleRate: sampleRate)
    }
}

struct TestDataError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The engines tests share (one model load each for the whole run; decoders are pooled).
enum SharedEngine {
    private static let cache = Locked<[Bool: PocketSphinxEngine]>([:])

    /// `cliDefaults`: pocketsphinx's own options and endpoints, as `pocketsphinx_continuous` runs; otherwise
    /// Steno's default configuration (`recommendedArguments`).
    static func get(cliDefaults: Bool = false) throws -> PocketSphinxEngine {
        try cache.withLock { engines in
            if let engine = engines[cliDefaults] { return engine }
            // Enough decoders made up front that tests calling a recognizer directly (not
            // through `transcribe`, which waits for one) never find none free.
            var configuration = PocketSphinxConfiguration(recognizers: 16, preparedRecognizers: 4)
            if cliDefaults {
                configuration.arguments = []
                configuration.endpointing = .detector  // the CLI's endpoints: its detector's alone
            }
            let made = try PocketSphinxEngine(configuration: configuration)
            engines[cliDefaults] = made
            return made
        }
    }
}

/// Feeds `audio` in chunks of `chunk` samples, then `finish()`; returns every event. A
/// recognizer of a shared engine may have to wait for a decoder (tests run in parallel): then
/// this waits for its `wake` (`woken`) and lets it proceed.
func transcribe(_ audio: TestAudio, with recognizer: any SpeechRecognizer, chunk: Int = 320,
                woken: DispatchSemaphore? = nil) throws -> [TranscriberEvent] {
    let floats = audio.floats
    var events: [TranscriberEvent] = []
    func settle() throws {
        while recognizer.isWaiting {
            guard let woken, woken.wait(timeout: .now() + 300) == .success else {
                throw TestDataError("the recognizer waited for a decoder and was not woken")
            }
            events += try recognizer.proceed()
        }
    }
    var start = 0
    while start < floats.count {
        let end = min(floats.count, start + chunk)
        events += try recognizer.accept(Array(floats[start..<end]))
        try settle()
        start = end
    }
    events += try recognizer.finish()
    try settle()
    return events
}

func transcribe(_ audio: TestAudio, chunk: Int = 320, options: RecognizerOptions = RecognizerOptions(),
                cliDefaults: Bool = false) throws -> [TranscriberEvent] {
    let woken = DispatchSemaphore(value: 0)
    let recognizer = try SharedEngine.get(cliDefaults: cliDefaults).makeRecognizer(options: options) { woken.signal() }
    return try transcribe(audio, with: recognizer, chunk: chunk, woken: woken)
}

extension Array where Element == TranscriberEvent {
    var finals: [RecognitionResult] {
        compactMap { if case .final(let result) = $0 { return result } else { return nil } }
    }

    var volatiles: [RecognitionResult] {
        compactMap { if case .volatile(let result) = $0 { return result } else { return nil } }
    }

    /// (started?, time) for each speech event, in order.
    var speech: [(started: Bool, at: Double)] {
        compactMap {
            switch $0 {
            case .speechStarted(let at): return (true, at)
            case .speechEnded(let at): return (false, at)
            default: return nil
            }
        }
    }
}

/// The CLI outputs recorded in Resources/cli-expected.txt: file → utterances.
func recordedCLIOutput() throws -> [String: [String]] {
    let text = try String(contentsOf: TestAudio.resourceURL("cli-expected.txt"), encoding: .utf8)
    var result: [String: [String]] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { continue }
        result[parts[0]] = parts[1].components(separatedBy: " | ")
    }
    return result
}

/// Runs `pocketsphinx_continuous -infile` (installed by the project's bootstrap) on a test
/// resource; returns the utterances it printed.
func runCLI(_ file: String, arguments: [String] = []) throws -> [String] {
    let model = PocketSphinxConfiguration()
    let run = try runChild("/usr/bin/pocketsphinx_continuous", [
        "-infile", try TestAudio.resourceURL(file).path,
        "-hmm", model.resolvedAcousticModel, "-lm", model.resolvedLanguageModel,
        "-dict", model.resolvedDictionary, "-logfn", "/dev/null",
    ] + arguments)
    guard run.status == 0 else { throw TestDataError("pocketsphinx_continuous failed on \(file) (exit status \(run.status))") }
    return run.stdout.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
}

/// Transcriptions several tests look at, made once per run (whichever test asks first).
enum SharedTranscriptions {
    typealias Result = (events: [TranscriberEvent], unused: Int)

    /// One file's transcription: a test asking while another makes it waits for that one.
    private final class Entry: @unchecked Sendable {
        let lock = NSLock()
        var result: Result?
    }

    private static let entries = Locked<[String: Entry]>([:])

    /// `file` through a recognizer of the shared engine (Steno's defaults, 320-sample chunks,
    /// or pocketsphinx's defaults with `cliDefaults`).
    static func get(_ file: String, cliDefaults: Bool = false) throws -> Result {
        let entry = entries.withLock { entries in
            let key = "\(file) \(cliDefaults)"
            if let entry = entries[key] { return entry }
            let entry = Entry()
            entries[key] = entry
            return entry
        }
        entry.lock.lock()
        defer { entry.lock.unlock() }
        if let done = entry.result { return done }
        let woken = DispatchSemaphore(value: 0)
        let recognizer = try SharedEngine.get(cliDefaults: cliDefaults).makePocketSphinxRecognizer { woken.signal() }
        let events = try transcribe(TestAudio.load(file), with: recognizer, woken: woken)
        let result = (events, 0)
        entry.result = result
        return result
    }
}
