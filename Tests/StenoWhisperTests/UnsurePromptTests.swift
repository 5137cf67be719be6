import Foundation
import StenoCore
import StenoSpeech
import StenoSystem
import Testing
@testable import StenoWhisper

/// A final whose prompt holds earlier finals tells the worker what to hear it with instead if it
/// comes out unsure (`"unsurePrompt"`: the phrases alone, or none). A scripted worker says in its
/// text what it was told; the worker's own rule, with the real model on a clip that loses its way,
/// is checked by Tests/whisper/test_worker.py. The detector and the recognizer are the real ones.
@Suite struct UnsurePromptTests {
    static let worker = Result { () throws -> WhisperWorker in
        try ScriptedWorker.start(name: "unsure", multilingual: false, languages: ["en"], answer: """
            def answer(options):
                if "unsurePrompt" not in options:
                    said = "Sure."
                elif options["unsurePrompt"] is None:
                    said = "Unsure alone."
                else:
                    said = "Unsure with " + options["unsurePrompt"]
                words = [[w, 0.1 + 0.3 * i, 0.35 + 0.3 * i, 0.9] for i, w in enumerate(said.split())]
                return {"text": said, "words": words, "noSpeech": 0.01, "logprob": -0.2, "dropped": None,
                        "window": 1000, "seconds": 0.001, "language": "en"}
            """)
    }

    /// The first final has no earlier finals to leave out; the next ones do, and keep the phrases.
    @Test func aFinalAfterOthersSaysWhatToHearItWithIfUnsure() throws {
        let sentence = try WorkerPaths.sentence("0930")
        let twice = NotSpeech.silence(0.5) + sentence + NotSpeech.silence(1.5) + sentence + NotSpeech.silence(1)
        for (phrases, unsure) in [([String](), "Unsure alone."), (["Marianne"], "Unsure with Marianne.")] {
            let vocabulary = phrases.isEmpty ? nil : try Vocabulary(phrases: phrases)
            let run = try RecognizerRun(options: RecognizerOptions(volatileResults: false, vocabulary: vocabulary),
                                        worker: try Self.worker.get())
            try run.feed(twice, untilIdle: true)
            try run.finish()
            let texts = run.finals.map(\.text)
            #expect(texts.count == 2 && texts.first == "Sure." && texts.last == unsure, "\(texts)")
        }
    }
}
