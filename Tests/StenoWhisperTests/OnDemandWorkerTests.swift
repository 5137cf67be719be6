import Foundation
import StenoCore
import StenoSystem
import StenoTestSupport
import Testing
@testable import StenoWhisper

/// A worker started on demand (the multilingual model beside the default): no process until
/// its first request, which it then answers; one that cannot load fails what waited for it, and
/// the next request tries again. Its engine knows the model's languages from the folder first.
extension ModelTests {
    @Suite struct OnDemandWorkerTests {
        @Test func itStartsWithItsFirstRequestAndAnswersIt() throws {
            let worker = try WhisperWorker(options: .init(python: WorkerPaths.python, script: WorkerPaths.script,
                                                          events: .silent, onDemand: true))
            defer { worker.stop() }
            #expect(!worker.isStarted && !worker.isReady && worker.processID == 0 && worker.hello == nil)
            let sentence = try WorkerPaths.sentence("0930")
            let outcome = Outcome()
            worker.submit(sentence[...], words: true, completion: outcome.completion)
            #expect(worker.isStarted)
            let result = try #require(outcome.wait(), "no answer").get()
            #expect(wordErrorRate(WorkerPaths.words(result.text), WorkerFaultTests.reference) <= 0.15, "\(result.text)")
            #expect(worker.isReady && worker.processID > 0 && worker.hello != nil)
        }

        @Test func oneThatCannotLoadFailsWhatWaitedAndTriesAgain() throws {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("steno-no-model-\(getpid()).py").path
            try "import sys\nprint('no model in this folder', file=sys.stderr)\nsys.exit(3)\n".write(toFile: path, atomically: true, encoding: .utf8)
            let worker = try WhisperWorker(options: .init(python: WorkerPaths.python, script: path, events: .silent, onDemand: true))
            defer { worker.stop() }
            for _ in 0..<2 {
                let outcome = Outcome()
                #expect(worker.submit([0, 0, 0][...], words: false, completion: outcome.completion) != nil)
                let result = try #require(outcome.wait(30), "a request waited for a worker that never loads")
                guard case .failure(let error) = result else {
                    Issue.record("answered without a model: \(result)")
                    continue
                }
                #expect(error.code == .internal && error.message.contains("did not load its model")
                        && error.message.contains("no model in this folder"), "\(error.message)")
                #expect(!worker.isStarted && worker.pendingCount == 0)
            }
        }

        /// The multilingual model's languages, read from its folder as its hello lists them.
        @Test func aModelFoldersLanguages() throws {
            let base = WorkerPaths.root + "/.venv/models/whisper-base"
            let codes = try #require(WhisperModelFolder.languages(at: base))
            #expect(codes.count == 99 && codes.prefix(5) == ["en", "zh", "de", "es", "ru"] && codes.contains("jw"), "\(codes)")
            #expect(WhisperModelFolder.languages(at: "/nonexistent") == nil)
            let english = FileManager.default.temporaryDirectory.appendingPathComponent("steno-english-\(getpid())").path
            try FileManager.default.createDirectory(atPath: english, withIntermediateDirectories: true)
            try #"{"alignment_heads": [[1, 0]], "suppress_ids": []}"#.write(toFile: english + "/config.json", atomically: true, encoding: .utf8)
            #expect(WhisperModelFolder.languages(at: english) == ["en"])
        }
    }
}
