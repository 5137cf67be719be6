import Foundation
import StenoCore
import StenoSpeech
import StenoSystem
import Testing
@testable import StenoWhisper

/// A multilingual model's finals say what language they were heard in. A scripted worker (the
/// real base is checked by Tests/whisper/test_multilingual_worker.py and, through a server, by
/// MultilingualServeTests) speaks the worker's framing: it says it is multilingual, and answers every request with
/// the same two words, heard in the session's language or, without one, "found" to be Javanese
/// (Whisper's "jw", BCP 47's "jv"). The detector and the recognizer are the real ones.
@Suite struct MultilingualTests {
    static let worker = Result { () throws -> WhisperWorker in
        try ScriptedWorker.start(name: "multilingual", multilingual: true, languages: ["en", "de", "jw"], answer: """
            def answer(options):
                result = {"text": "Guten Tag.", "words": [["Guten", 0.1, 0.4, 0.9], ["Tag.", 0.45, 0.8, 0.9]],
                          "noSpeech": 0.01, "logprob": -0.2, "dropped": None, "window": 1000, "seconds": 0.001}
                # Heard after the audio before it: said so, and whether the prompt held that audio's words too.
                if options.get("context"):
                    said = "Doppelt." if "Guten Tag." in (options.get("prompt") or "") else "Mit Kontext."
                    result["text"], result["words"] = said, [[said, 0.1, 0.8, 0.9]]
                # Translated: English, and the original when asked for.
                if options.get("task") == "translate":
                    result["original"] = {"text": result["text"], "words": result["words"], "language": "de"}
                    result["text"], result["words"] = "Good day.", [["Good", 0.1, 0.4, 0.9], ["day.", 0.45, 0.8, 0.9]]
                    if not options.get("original"):
                        del result["original"]
                tag = options.get("language")
                if tag:
                    result["language"] = tag.split("-")[0].lower()
                else:
                    result["language"], result["languageProbability"] = "jw", 0.8
                return result
            """)
    }

    @Test func finalsSayTheLanguageTheyWereHeardIn() throws {
        let engine = WhisperEngine(worker: try Self.worker.get(), model: "scripted", detection: try RecognizerRun.detection.get())
        #expect(engine.info.language == LanguageTag.multilingual)
        let sentence = NotSpeech.silence(0.5) + (try WorkerPaths.sentence("0930")) + NotSpeech.silence(1)
        for (told, heard) in [(nil, "jv"), ("de-DE", "de")] as [(String?, String)] {
            let run = try RecognizerRun(options: RecognizerOptions(volatileResults: true), language: told, worker: engine.worker)
            try run.feed(sentence)
            try run.finish()
            #expect(!run.finals.isEmpty)
            #expect(run.finals.allSatisfy { $0.language == heard }, "\(run.finals)")
            // Volatiles name none: a volatile's language is a volatile too.
            #expect(run.volatiles.allSatisfy { $0.language == nil })
        }
    }

    /// A final is heard after the last final's audio, whose words leave the prompt (the audio
    /// says them), in a language the session names or one to be found (the worker finds it in
    /// the utterance's own audio: Tests/whisper/test_multilingual.py).
    @Test func aFinalInTheSessionsLanguageIsHeardAfterTheLastFinalsAudio() throws {
        let engine = WhisperEngine(worker: try Self.worker.get(), model: "scripted", detection: try RecognizerRun.detection.get())
        let sentence = try WorkerPaths.sentence("0930")
        let two = NotSpeech.silence(0.5) + sentence + NotSpeech.silence(1.5) + sentence + NotSpeech.silence(1)
        for (told, heard) in [("de", ["Guten Tag.", "Mit Kontext."]), (nil, ["Guten Tag.", "Mit Kontext."])] as [(String?, [String])] {
            let run = try RecognizerRun(options: RecognizerOptions(volatileResults: false), language: told, worker: engine.worker)
            try run.feed(two)
            try run.finish()
            #expect(run.finals.map(\.text) == heard, "language \(told ?? "found")")
        }
    }

    /// A translation's finals carry their original (a channel's second rendition), also where
    /// agreement cuts a long utterance: the piece is heard as a final then, not taken from a
    /// volatile (which hears no original).
    @Test func aTranslatedFinalCarriesItsOriginalAlsoWhereAgreementCutsALongUtterance() throws {
        let engine = WhisperEngine(worker: try Self.worker.get(), model: "scripted", detection: try RecognizerRun.detection.get())
        let sentence = try WorkerPaths.sentence("0930")
        let long = NotSpeech.silence(0.5) + sentence + sentence + sentence + NotSpeech.silence(1)
        var options = RecognizerOptions(volatileResults: true)
        options.languagePlan = LanguagePlan(translate: "en")
        let run = try RecognizerRun(options: options, language: "de", worker: engine.worker)
        try run.feed(long)
        try run.finish()
        #expect(!run.finals.isEmpty)
        for final in run.finals {
            // A piece cut where speech goes on ends no sentence, in either language.
            #expect(["Good day.", "Good day"].contains(final.text) && final.language == "de", "\(final)")
            let original = try #require(final.original)
            #expect(original.text == (final.text == "Good day" ? "Guten Tag" : "Guten Tag.") && original.language == "de", "\(original)")
            #expect(original.words.map(\.range) == final.words.map(\.range), "timed on the session's timeline as the translation is")
        }
        #expect(run.volatiles.allSatisfy { $0.original == nil })
        #expect(run.finals.count >= 2, "the long utterance was cut where its volatiles agreed: \(run.finals)")
    }

    @Test func whisperCodesBecomeLanguageTags() {
        #expect(WhisperRecognizer.languageTag(whisperCode: "de") == "de")
        #expect(WhisperRecognizer.languageTag(whisperCode: "haw") == "haw")
        #expect(WhisperRecognizer.languageTag(whisperCode: "jw") == "jv")
        #expect(WhisperRecognizer.languageTag(whisperCode: "") == nil)
        #expect(WhisperRecognizer.languageTag(whisperCode: "<|de|>") == nil)
    }
}
