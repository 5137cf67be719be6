import Foundation
import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

@Suite struct Times {
    /// Word and result times lie inside the audio and increase, a final's range covers its
    /// words, results do not overlap, partials lie after the last final.
    @Test func timesAreOrderedAndInsideTheAudio() throws {
        let audio = try TestAudio.load("beckett.wav")
        let (events, _) = try SharedTranscriptions.get("beckett.wav")
        #expect(events.finals.count == 5)
        var volatileText: String?
        var lastFinalEnd = 0.0
        var lastWordEnd = 0.0
        for event in events {
            switch event {
            case .final(let result):
                #expect(result.range.start >= lastFinalEnd)
                #expect(result.range.start < result.range.end)
                #expect(result.range.end <= audio.duration)
                #expect(!result.words.isEmpty)
                #expect(result.text == result.words.map(\.text).joined(separator: " "))
                for word in result.words {
                    #expect(result.range.contains(word.range))
                    #expect(word.range.start >= lastWordEnd)
                    #expect(word.range.start < word.range.end)
                    #expect((0...1).contains(word.confidence))
                    lastWordEnd = word.range.end
                }
                lastFinalEnd = result.range.end
                volatileText = nil
            case .volatile(let result):
                #expect(result.text != volatileText)  // only when the text changes
                volatileText = result.text
                #expect(result.range.start >= lastFinalEnd)
                #expect(result.range.end <= audio.duration)
                for word in result.words {
                    #expect(result.range.contains(word.range))
                    #expect(word.confidence == 0)
                }
            case .speechStarted(let at), .speechEnded(let at):
                #expect((0...audio.duration).contains(at))
            case .unheard:
                Issue.record("pocketsphinx has no lanes")
            }
        }
    }

    /// pocketsphinx drops silence frames and restarts its frame grid at each utterance: words
    /// must still land where they were said. 5 s of digital silence before a sentence moves
    /// every word by exactly 5 s (80000 samples is a whole number of 10 ms frames, so the
    /// frames line up); an odd offset moves them by the offset, within the protocol's 20 ms
    /// (the frames then cut the sound differently, and the alignment may move by a frame).
    @Test(arguments: [80000, 80050, 8123])
    func leadingSilenceMovesWordsByItsLength(silence: Int) throws {
        let audio = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0880.wav")
        let plain = try SharedTranscriptions.get(audio.name).events.finals.flatMap(\.words)
        let padded = try transcribe(audio.afterSilence(samples: silence)).finals.flatMap(\.words)
        let shift = Double(silence) / 16000
        #expect(padded.map(\.text) == plain.map(\.text))
        #expect(plain.count == 8)
        let tolerance = silence % 160 == 0 ? 1e-9 : 0.02
        for (before, after) in zip(plain, padded) {
            #expect(abs(after.range.start - before.range.start - shift) <= tolerance, "\(after.text)")
            #expect(abs(after.range.end - before.range.end - shift) <= tolerance, "\(after.text)")
        }
    }

    /// The same for a later utterance: more silence between two utterances moves the second
    /// one's words by exactly that much. (81920 samples = 5.12 s is a whole number of both
    /// 2048-sample blocks and 160-sample frames, so the second utterance is cut into the same
    /// blocks and frames; digital silence leaves the detector's noise estimate as it was.)
    @Test func moreSilenceBetweenUtterancesMovesTheLaterWords() throws {
        let first = try TestAudio.load("cards/002.wav")
        let second = try TestAudio.load("cards/004.wav")
        let near = try transcribe(first.appending(second.afterSilence(samples: 32000))).finals
        let far = try transcribe(first.appending(second.afterSilence(samples: 32000 + 81920))).finals
        #expect(near.count == 2)
        #expect(far.map(\.text) == near.map(\.text))
        let moved = try #require(far.last).words
        let original = try #require(near.last).words
        #expect(!original.isEmpty)
        for (a, b) in zip(original, moved) {
            #expect(abs(b.range.start - a.range.start - 5.12) < 1e-9, "\(b.text)")
            #expect(abs(b.range.end - a.range.end - 5.12) < 1e-9, "\(b.text)")
        }
        // The first utterance is not affected at all.
        #expect(far.first == near.first)
    }

    @Test func receivedAndAnalyzedSeconds() throws {
        let recognizer = try SharedEngine.get().makeRecognizer()
        _ = try recognizer.accept([Float](repeating: 0, count: 5000))
        #expect(recognizer.analyzedSeconds == 4096.0 / 16000)  // two 2048-sample blocks
        _ = try recognizer.endUtterance()
        #expect(recognizer.analyzedSeconds == 5000.0 / 16000)  // all it received
        recognizer.cancel()
    }
}
