import StenoCore
import StenoSpeech
import StenoTestSupport
import Testing
@testable import StenoWhisper

extension ModelTests {
    @Suite struct WhisperAgreementTests {
        static func words(_ text: String, every: Double = 0.5) -> [Word] {
            text.split(separator: " ").enumerated().map { i, w in
                Word(String(w), range: TimeRange(start: Double(i) * every, end: Double(i + 1) * every), confidence: 0.9)
            }
        }

        @Test func twoVolatilesAgreeOnTheirLeadingWordsBeforeTheMargin() {
            let a = Self.words("He was not an ill disposed")
            let b = Self.words("he was, not an ill-disposed young man")
            // "ill disposed" is one word in the second volatile: agreement stops there.
            #expect(WhisperRecognizer.agreed(a, b, before: 10) == 4)
            // Words ending after the limit are not committed.
            #expect(WhisperRecognizer.agreed(a, b, before: 1.2) == 2)
            #expect(WhisperRecognizer.agreed([], b, before: 10) == 0)
        }

        /// What follows committed words may begin by hearing them again (their alignment ended
        /// early, the prompt ends with them): those words go, the longest repeat of up to five.
        @Test func committedWordsHeardAgainAreDropped() throws {
            func result(_ text: String) throws -> WhisperResult {
                let words = text.split(separator: " ").enumerated().map { #"["\#($1)",\#($0),\#($0 + 1),0.9]"# }
                return try WhisperResult(json: JSONParser().parse(#"{"text":"\#(text)","words":[\#(words.joined(separator: ","))]}"#))
            }
            let committed = ["ten", "of", "clubs", "four", "queen", "of", "clubs"].suffix(WhisperRecognizer.repeatable).map { $0 }
            let again = WhisperRecognizer.withoutRepeat(of: committed, try result("Queen of clubs, seven of clubs."))
            #expect(again.text == "seven of clubs." && again.words.count == 3)
            #expect(WhisperRecognizer.withoutRepeat(of: committed, try result("Seven of clubs.")).text == "Seven of clubs.")
            #expect(WhisperRecognizer.withoutRepeat(of: committed, try result("clubs.")).text.isEmpty)
            #expect(WhisperRecognizer.withoutRepeat(of: [], try result("Clubs.")).text == "Clubs.")
        }

        /// Whisper now and then skips speech in a volatile, twice alike, and aligns what it heard over
        /// the gap ("he was not" … "he might have been made" over ten seconds): a word aligned over
        /// more than two seconds is not committed, nor anything after it.
        @Test func aWordStretchedOverSkippedSpeechIsNotCommitted() {
            let heard = Self.words("he was not he might have been made")
            var stretched = heard
            stretched[3] = Word("he", range: TimeRange(start: 1.5, end: 9.5), confidence: 0.9)
            #expect(WhisperRecognizer.agreed(stretched, stretched, before: 20) == 3)
            #expect(WhisperRecognizer.agreed(heard, heard, before: 20) == heard.count)
        }

        /// Volatiles come every second of new speech on a free worker (or a quarter of a long
        /// utterance), and give way as requests wait in it, so finals are not kept waiting.
        @Test func volatilesThinOutWhileTheWorkerHasWaitingRequests() {
            let second = 16_000
            #expect(WhisperRecognizer.volatileSpacing(utterance: 2 * second, pending: 0) == second)
            #expect(WhisperRecognizer.volatileSpacing(utterance: 12 * second, pending: 0) == 3 * second)
            #expect(WhisperRecognizer.volatileSpacing(utterance: 2 * second, pending: 1) == 3 * second)
            #expect(WhisperRecognizer.volatileSpacing(utterance: 2 * second, pending: 2) == 5 * second)
            #expect(WhisperRecognizer.volatileSpacing(utterance: 40 * second, pending: 1) == 10 * second)
        }

        /// Twenty-five seconds of reading with no pause the detector ends (a scripted detector hears
        /// speech throughout, as a detector does in babble: Silero would find the pauses between
        /// these sentences): its first words are final long before the end of its speech, and
        /// nothing is lost or doubled on the way.
        @Test func aLongUtteranceIsCommittedInPieces() throws {
            var samples: [Float] = NotSpeech.silence(0.5)
            var reference: [String] = []
            let texts = ["0870": "and mister john dashwood had then leisure to consider how much there might be prudently in his power to do for them",
                         "0880": WhisperRecognizerTests.reference["0880"]!, "0890": WhisperRecognizerTests.reference["0890"]!,
                         "0920": "had he married a more amiable woman he might have been made still more respectable than he was",
                         "0930": WhisperRecognizerTests.reference["0930"]!]
            for name in ["0870", "0880", "0890", "0920", "0930"] {
                // Each sentence's own leading and trailing quiet cut down, so the detector hears one utterance.
                var sentence = try WorkerPaths.sentence(name)
                while let first = sentence.first, abs(first) < 0.02 { sentence.removeFirst() }
                while let last = sentence.last, abs(last) < 0.02 { sentence.removeLast() }
                samples += sentence
                reference += texts[name]!.split(separator: " ").map(String.init)
            }
            let total = Double(samples.count) / 16_000
            let run = try RecognizerRun(options: RecognizerOptions(), detector: { SpeechFrom(sample: 8_000) })
            try run.feed(samples, lockstep: true)
            let beforeEnd = run.finals
            let fed = run.events.count
            try run.finish()
            #expect(wordErrorRate(run.words, reference) <= 0.15, "heard: \(run.words)")
            #expect(beforeEnd.contains { $0.range.end < total - 8 }, "finals before the end: \(beforeEnd.map(\.range))")
            // Some of them while speech went on: committed by agreement, not ended by the detector.
            var ended = false
            var committed = 0
            for event in run.events[..<fed] {
                switch event {
                case .speechEnded: ended = true
                case .speechStarted: ended = false
                case .final: if !ended { committed += 1 }
                default: break
                }
            }
            // And not once only: after the first commit, the rest goes on committing as it is
            // heard (typically every second or two), rather than waiting to be 4 s long again.
            let ends = beforeEnd.map(\.range.end)
            let gaps = zip(ends.dropFirst(), ends).map { $0 - $1 }.sorted()
            #expect(committed >= 3 && !gaps.isEmpty && gaps[gaps.count / 2] < 3.5, "finals end at \(ends)")
            var last = 0.0
            for final in run.finals {
                #expect(final.range.start >= last - 0.001)
                last = final.range.end
            }
        }
    }
}
