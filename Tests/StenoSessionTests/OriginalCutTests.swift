import StenoCore
import StenoSession
import StenoSpeech
import Testing

/// A translation's original through the pipeline: a finalize's cut keeps the words before it
/// in both languages, so the original rendition ends where its translation does.
@Suite struct OriginalCutTests {
    /// Hears "Good morning" (translated) and "Buon giorno" (its original), each word half of
    /// what it was fed; shows a volatile as it hears.
    final class Translating: SpeechRecognizer {
        let info = SpeechEngineInfo(name: "scripted", version: "1", model: "translating", language: LanguageTag.multilingual,
                                    sampleRate: 16_000)
        var sampleRate: Int { 16_000 }
        private var fed = 0
        var analyzedSeconds: Double { Double(fed) / 16_000 }
        var isWaiting: Bool { false }

        func accept(_ samples: UnsafeBufferPointer<Float>) throws(StenoError) -> [TranscriberEvent] {
            fed += samples.count
            return [.volatile(RecognitionResult(range: TimeRange(start: 0, end: analyzedSeconds), text: "Good", written: true))]
        }

        func endUtterance() throws(StenoError) -> [TranscriberEvent] {
            let end = analyzedSeconds
            guard end > 0 else { return [] }
            func words(_ a: String, _ b: String) -> [Word] {
                [Word(a, range: TimeRange(start: 0, end: end / 2), confidence: 1),
                 Word(b, range: TimeRange(start: end / 2, end: end), confidence: 1)]
            }
            fed = 0
            return [.final(RecognitionResult(range: TimeRange(start: 0, end: end), text: "Good morning", words: words("Good", "morning"),
                                             written: true, language: "it",
                                             original: Original(text: "Buon giorno", words: words("Buon", "giorno"), language: "it")))]
        }

        func finish() throws(StenoError) -> [TranscriberEvent] { try endUtterance() }
        func skipSilence(_ samples: Int) throws(StenoError) -> [TranscriberEvent] { try endUtterance() }
        func cancel() {}
        func proceed() throws(StenoError) -> [TranscriberEvent] { [] }
    }

    @Test func aFinalizesCutKeepsTheOriginalsWordsBeforeItToo() throws {
        let pipeline = try TranscriptionPipeline(format: AudioFormat(encoding: .pcmS16LE, sampleRate: 16_000, channels: 1),
                                                 recognizer: Translating())
        _ = try pipeline.append([UInt8](repeating: 1, count: 2 * 32_000))  // 2 s
        let finals = try pipeline.finalize(through: 1.2).compactMap { event -> RecognitionResult? in
            if case .final(let result) = event { result } else { nil }
        }
        let cut = try #require(finals.first)
        #expect(cut.text == "Good" && cut.original?.text == "Buon", "\(finals)")
        #expect(cut.original?.words.map(\.text) == ["Buon"] && cut.original?.language == "it")
    }
}
