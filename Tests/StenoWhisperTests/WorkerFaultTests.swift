import Foundation
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTestSupport
import Testing
@testable import StenoWhisper

/// A real worker that honours requests' "fault" (`--test-faults`): crashed, hung, poisoned,
/// chatty. What a fault costs stays with its own request; everything else is answered.
extension ModelTests {
    @Suite struct WorkerFaultTests {
        static let reference = ["he", "might", "even", "have", "been", "made", "amiable", "himself"]

        static func faulty(hangSeconds: Double = 30, maximumPending: Int = 256, arguments: [String] = [],
                           loadBackoffLimit: Double = 30) throws -> WhisperWorker {
            try WhisperWorker(options: .init(python: WorkerPaths.python, script: WorkerPaths.script,
                                             arguments: ["--test-faults"] + arguments, maximumPending: maximumPending,
                                             events: .silent, hangSeconds: hangSeconds, loadBackoffLimit: loadBackoffLimit))
        }

        static func fault(_ name: String) -> JSONObject { JSONObject(["fault": .string(name)]) }

        static func expectHeard(_ outcome: Outcome, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let result = try #require(outcome.wait(), sourceLocation: sourceLocation).get()
            #expect(wordErrorRate(WorkerPaths.words(result.text), reference) <= 0.15, "\(result.text)",
                    sourceLocation: sourceLocation)
        }

        /// Three requests of `sentence`, the middle one with `fault`; then what each came to:
        /// the two heard, the middle one failed with `failure` in its message.
        static func three(_ worker: WhisperWorker, _ sentence: ArraySlice<Float>, fault: String, failure: String) throws {
            let (first, poisoned, last) = (Outcome(), Outcome(), Outcome())
            worker.submit(sentence, words: true, completion: first.completion)
            worker.submit(sentence, words: true, extra: Self.fault(fault), completion: poisoned.completion)
            worker.submit(sentence, words: true, completion: last.completion)
            try expectHeard(first)
            try expectHeard(last)
            try expectFailed(poisoned, failure)
        }

        static func expectFailed(_ outcome: Outcome, _ words: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            switch try #require(outcome.wait(), sourceLocation: sourceLocation) {
            case .success(let result): Issue.record("heard \(result.text)", sourceLocation: sourceLocation)
            case .failure(let error): #expect(error.message.contains(words), "\(error.message)", sourceLocation: sourceLocation)
            }
        }

        @Test func aRequestThatCrashesTheWorkerIsHeardAgainAloneThenFailsAlone() throws {
            let worker = try Self.faulty()
            defer { worker.stop() }
            let sentence = try WorkerPaths.sentence("0930")[...]
            try Self.three(worker, sentence, fault: "crash", failure: "failed twice")
            // It crashed twice (in its batch, then alone); another worker serves.
            #expect(worker.restarts == 2)
            #expect(worker.isReady && worker.pendingCount == 0)
            let next = Outcome()
            worker.submit(sentence, words: true, completion: next.completion)
            try Self.expectHeard(next)
        }

        @Test func aRequestThatHangsTheWorkerIsEndedByTheWatchdogAndFailsAlone() throws {
            let worker = try Self.faulty(hangSeconds: 1.5)
            defer { worker.stop() }
            let sentence = try WorkerPaths.sentence("0930")[...]
            let (hanging, other) = (Outcome(), Outcome())
            worker.submit(sentence, words: true, extra: Self.fault("hang"), completion: hanging.completion)
            worker.submit(sentence, words: true, completion: other.completion)
            try Self.expectHeard(other)
            try Self.expectFailed(hanging, "failed twice")
            #expect(worker.restarts == 2)
            #expect(worker.isReady)
        }

        @Test func aPoisonedRequestFailsAloneAndItsBatchIsHeard() throws {
            let worker = try Self.faulty()
            defer { worker.stop() }
            let sentence = try WorkerPaths.sentence("0930")[...]
            // A long request first, so that the three after it come while it is heard: one batch.
            // (A final: the volatiles after it cannot join its batch.)
            worker.submit(sentence + sentence + sentence, words: false, priority: 1, completion: Outcome().completion)
            try Self.three(worker, sentence, fault: "raise", failure: "poisoned")
            #expect(worker.restarts == 0)
        }

        @Test func aLibraryPrintingToStandardOutputCannotCorruptTheFrames() throws {
            let worker = try Self.faulty()
            defer { worker.stop() }
            let outcome = Outcome()
            worker.submit(try WorkerPaths.sentence("0930")[...], words: true, extra: Self.fault("print"), completion: outcome.completion)
            try Self.expectHeard(outcome)
            #expect(worker.restarts == 0)
        }

        @Test func cancelledRequestsAreNotHeard() throws {
            let worker = try Self.faulty()
            defer { worker.stop() }
            let sentence = try WorkerPaths.sentence("0930")[...]
            let blocker = Outcome()
            worker.submit(sentence + sentence + sentence + sentence, words: false, priority: 1, extra: Self.fault("slow"),
                          completion: blocker.completion)
            let outcomes = (0..<3).map { _ in Outcome() }
            let ids = outcomes.map { worker.submit(sentence, words: true, completion: $0.completion)! }
            worker.cancel(ids.prefix(2))
            try Self.expectHeard(outcomes[2])
            _ = blocker.wait()
            #expect(outcomes[0].wait(0.5) == nil && outcomes[1].wait(0.1) == nil)
            // Heard: the blocker and the one left, nothing of the cancelled two.
            #expect(worker.startedCount == 2)
            #expect(worker.pendingCount == 0)
        }

        @Test func aFinalThatFindsTheWorkerFullWaitsForRoom() throws {
            let worker = try Self.faulty(maximumPending: 1)
            defer { worker.stop() }
            let sentence = try WorkerPaths.sentence("0930")[...]
            let (blocker, final) = (Outcome(), Outcome())
            #expect(worker.submit(sentence, words: true, extra: Self.fault("slow"), completion: blocker.completion) != nil)
            // A volatile is refused; a final waits its turn.
            #expect(worker.submit(sentence, words: false, completion: { _ in }) == nil)
            #expect(worker.submit(sentence, words: true, priority: 1, waitIfFull: true, completion: final.completion) != nil)
            #expect(worker.pendingCount == 2)
            try Self.expectHeard(blocker)
            try Self.expectHeard(final)
        }

        /// A worker that dies while loading its model is started again after a growing pause,
        /// not at once for ever, and serves again once it can load.
        @Test func aWorkerThatDiesWhileLoadingBacksOff() throws {
            let real = try #require({ () -> String? in
                if case .object(let hello)? = try WorkerPaths.worker.get().hello, case .string(let path)? = hello["path"] { return path }
                return nil
            }())
            let link = FileManager.default.temporaryDirectory.appendingPathComponent("steno-model-\(getpid())").path
            try? FileManager.default.removeItem(atPath: link)
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
            defer { try? FileManager.default.removeItem(atPath: link) }
            let worker = try Self.faulty(arguments: ["--model", link], loadBackoffLimit: 2)
            defer { worker.stop() }
            // The model goes away and the worker dies: every start after that fails to load.
            try FileManager.default.removeItem(atPath: link)
            kill(worker.processID, SIGKILL)
            let outcome = Outcome()
            worker.submit(try WorkerPaths.sentence("0930")[...], words: true, completion: outcome.completion)
            Thread.sleep(forTimeInterval: 4)
            // Pauses of 0.5, 1 and 2 s: a few starts in 4 s, not dozens.
            let restarts = worker.restarts
            #expect(restarts >= 2 && restarts <= 6, "\(restarts) restarts in 4 s")
            #expect(!worker.isReady)
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
            try Self.expectHeard(outcome)
            #expect(worker.isReady)
        }
    
        /// While a final is awaited (here behind another session's long request), the session's
        /// detector goes on: the next utterance is found before the first one's final comes.
        @Test func theDetectorHearsOnWhileAFinalIsAwaited() throws {
            let worker = try Self.faulty()
            defer { worker.stop() }
            let sentence = try WorkerPaths.sentence("0930")
            let blocker = Outcome()
            worker.submit((sentence + sentence)[...], words: false, priority: 1, extra: Self.fault("slow"), completion: blocker.completion)
            let run = try RecognizerRun(options: RecognizerOptions(volatileResults: false), worker: worker)
            var samples = NotSpeech.silence(0.5)
            samples += sentence
            samples += NotSpeech.silence(1.2)
            samples += sentence
            samples += NotSpeech.silence(1)
            try run.feed(samples)
            try run.finish()
            let events: [TranscriberEvent] = run.events
            var starts: [Int] = []
            var finals: [Int] = []
            for (i, event) in events.enumerated() {
                if case .speechStarted = event { starts.append(i) }
                if case .final = event { finals.append(i) }
            }
            #expect(starts.count == 2 && finals.count == 2, "\(events)")
            if starts.count == 2, let first = finals.first { #expect(starts[1] < first, "\(events)") }
            #expect(wordErrorRate(run.words, Self.reference + Self.reference) <= 0.15, "\(run.words)")
        }
    }
}
