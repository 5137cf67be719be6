import Foundation
import StenoAudio
import StenoCore
import StenoSystem
import StenoTestSupport
import Testing
@testable import StenoWhisper

/// The repository's .venv (scripts/bootstrap.sh) and worker, found from this file.
enum WorkerPaths {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let python = root + "/.venv/bin/python"
    static let script = root + "/scripts/whisper_worker.py"
    static let librivox = "/usr/share/pocketsphinx/test/data/librivox/"
    /// One real worker (one loaded model) for every suite here.
    static let worker = Result { try WhisperWorker(options: .init(python: python, script: script, events: .silent)) }

    static func sentence(_ name: String) throws -> [Float] {
        try WAVFile(path: librivox + "sense_and_sensibility_01_austen_64kb-\(name).wav").mono
    }

    /// Lowercase words without punctuation.
    static func words(_ text: String) -> [String] {
        text.lowercased().split { !($0.isLetter || $0 == "'") }.map(String.init)
    }
}

/// Waits for one completion.
final class Outcome: Sendable {
    private let box = Locked<Result<WhisperResult, StenoError>?>(nil)
    private let done = DispatchSemaphore(value: 0)
    var completion: WhisperWorker.Completion {
        { [self] result in
            box.withLock { $0 = result }
            done.signal()
        }
    }
    func wait(_ seconds: Double = 120) -> Result<WhisperResult, StenoError>? {
        guard done.wait(timeout: .now() + seconds) == .success else { return nil }
        return box.withLock { $0 }
    }
}

@Suite struct WhisperFrameTests {
    @Test func aRequestReadsBackAsItWasWritten() throws {
        let frame = WhisperFrame.request(id: 0x0102_0304_0506_0708, options: #"{"words":true}"#, samples: [0, 1, -1, 2, .nan][...])
        let bytes = frame.encoded
        let length = try WhisperFrame.length(header: Array(bytes[0..<4]))
        #expect(length == bytes.count - 4)
        let back = try WhisperFrame(rest: Array(bytes[4...]))
        #expect(back == frame)
        // Full scale is ±32767, out of range is clipped, NaN is silence.
        #expect(back.payload == [0, 0, 0xFF, 0x7F, 0x01, 0x80, 0xFF, 0x7F, 0, 0])
    }

    @Test func aResultReadsItsAlternativesAndLanguage() throws {
        let json = try JSONParser().parse(#"{"text":"He was.","words":[],"language":"de","languageProbability":0.93,"alternatives":[["He was.",0],["He is.",-0.25],["bad"],["He saw.",0.5]]}"#)
        let result = try WhisperResult(json: json)
        #expect(result.alternatives == [Alternative(text: "He was.", score: 0), Alternative(text: "He is.", score: -0.25),
                                        Alternative(text: "He saw.", score: 0)])
        #expect(result.language == "de" && result.languageProbability == 0.93)
        let plain = try WhisperResult(json: try JSONParser().parse(#"{"text":""}"#))
        #expect(plain.alternatives.isEmpty && plain.language == nil && plain.languageProbability == nil)
    }

    @Test func aFrameTooLongOrOfAnUnknownKindIsRefused() {
        #expect(throws: StenoError.self) { try WhisperFrame.length(header: [0xFF, 0xFF, 0xFF, 0x7F]) }
        #expect(throws: StenoError.self) { try WhisperFrame.length(header: [3, 0, 0, 0]) }
        #expect(throws: StenoError.self) { try WhisperFrame(rest: [9] + [UInt8](repeating: 0, count: 12)) }
        #expect(throws: StenoError.self) { try WhisperFrame(rest: [2] + [UInt8](repeating: 0, count: 8) + [200, 0, 0, 0]) }
    }
}

/// The suites that share `WorkerPaths.worker` (one loaded model, which some of them kill):
/// one at a time, their tests too.
@Suite(.serialized) enum ModelTests {}

/// One real worker (one loaded model) for the suite: its tests run one at a time.
extension ModelTests {
    @Suite struct WhisperWorkerTests {
        static var worker: Result<WhisperWorker, any Error> { WorkerPaths.worker }

        @Test func itHearsASentenceWithWordTimes() throws {
            let worker = try Self.worker.get()
            let outcome = Outcome()
            #expect(worker.submit(try WorkerPaths.sentence("0930")[...], words: true, completion: outcome.completion) != nil)
            let result = try #require(outcome.wait()).get()
            // Within a word of the reference (the same model writes a word otherwise on some processors).
            let reference = ["he", "might", "even", "have", "been", "made", "amiable", "himself"]
            #expect(wordErrorRate(WorkerPaths.words(result.text), reference) <= 0.15, "\(result.text)")
            #expect(result.words.count == WorkerPaths.words(result.text).count)
            #expect(result.words.first!.range.start >= 0 && result.words.last!.range.end <= 3.5)
            #expect(result.dropped == nil)
        }

        @Test func killedMidRequestItIsRestartedAndEveryRequestAnswered() throws {
            let worker = try Self.worker.get()
            let before = worker.restarts
            let names = ["0880", "0930", "0890"]
            let outcomes = names.map { _ in Outcome() }
            for (name, outcome) in zip(names, outcomes) {
                #expect(worker.submit(try WorkerPaths.sentence(name)[...], words: true, completion: outcome.completion) != nil)
            }
            // Killed while it works on them: the supervisor starts another and sends them again.
            Thread.sleep(forTimeInterval: 0.1)
            kill(worker.processID, SIGKILL)
            var texts: [String] = []
            for outcome in outcomes {
                texts.append(try #require(outcome.wait()).get().text)
            }
            #expect(worker.restarts == before + 1)
            #expect(worker.isReady)
            let references = ["he was not an ill disposed young man", "he might even have been made amiable himself",
                              "unless to be rather cold hearted and rather selfish is to be ill disposed"]
            // Every one heard, within a few words of the three ("ill-disposed" is "old-sposed" here).
            #expect(texts.allSatisfy { !$0.isEmpty })
            let heard = texts.flatMap(WorkerPaths.words)
            #expect(wordErrorRate(heard, references.flatMap { $0.split(separator: " ").map(String.init) }) <= 0.15, "\(texts)")
            #expect(worker.pendingCount == 0)
        }

        /// A volatile is heard in the window WhisperRecognizer's rule asks for (5 s), a final in
        /// the worker's own (10 s): the request says so (`minWindow`), the worker does not decide.
        @Test func aRequestNamesItsLeastWindow() throws {
            let worker = try Self.worker.get()
            // 2 s: shorter than either window with its margin (the audio plus 2 s).
            let sentence = try WorkerPaths.sentence("0930").prefix(32_000)
            let volatile = Outcome(), final = Outcome()
            // One after the other: requests batched together are heard in the longest window any needs.
            #expect(worker.submit(sentence, words: false, volatile: true, minimumWindow: WhisperRecognizer.volatileWindow,
                                  completion: volatile.completion) != nil)
            #expect(try #require(volatile.wait()).get().window == 500)
            #expect(worker.submit(sentence, words: true, volatile: false, completion: final.completion) != nil)
            #expect(try #require(final.wait()).get().window == 1000)
        }

        @Test func silenceGivesNoText() throws {
            let worker = try Self.worker.get()
            let outcome = Outcome()
            #expect(worker.submit([Float](repeating: 0, count: 16_000 * 3)[...], words: true, completion: outcome.completion) != nil)
            let result = try #require(outcome.wait()).get()
            #expect(result.text == "")
            #expect(result.words.isEmpty)
        }

        @Test func aMissingModelIsAClearErrorAtStart() throws {
            let empty = FileManager.default.temporaryDirectory.appendingPathComponent("no-model-\(getpid())").path
            try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: empty) }
            #expect {
                _ = try WhisperWorker(options: .init(python: WorkerPaths.python, script: WorkerPaths.script,
                                                     arguments: ["--model", empty], events: .silent), timeout: 60)
            } throws: { error in
                "\(error)".contains("no model") || ((error as? StenoError)?.message.contains("no model") ?? false)
            }
        }
    }
}
