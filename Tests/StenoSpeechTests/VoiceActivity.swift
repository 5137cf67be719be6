import Foundation
import StenoCore
import StenoSystem
import Testing
@testable import StenoSpeech

@Suite struct VoiceActivity {
    /// Speech events alternate, lie inside the audio, and bracket the words: each final's
    /// words lie in one speech segment (give or take a frame or two of alignment).
    @Test func speechEventsBracketTheWords() throws {
        let events = try SharedTranscriptions.get("beckett.wav").events
        let speech = events.speech
        #expect(speech.count == 10)
        #expect(speech.enumerated().allSatisfy { $0.offset % 2 == 0 ? $0.element.started : !$0.element.started })
        #expect(zip(speech, speech.dropFirst()).allSatisfy { $0.at <= $1.at })
        let segments = stride(from: 0, to: speech.count - 1, by: 2).map { (speech[$0].at, speech[$0 + 1].at) }
        for (result, segment) in zip(events.finals, segments) {
            #expect(result.range.start >= segment.0 - 0.1, "\(result.text)")
            #expect(result.range.end <= segment.1 + 0.1, "\(result.text)")
        }
    }

    /// The standalone detector (no model) reports exactly the speech events of a recognizer
    /// whose detector alone ends utterances (`Endpointing.detector`), and does not care about
    /// chunking either.
    @Test func standaloneDetectorAgreesWithTheRecognizer() throws {
        let audio = try TestAudio.load("beckett.wav")
        let recognized = try SharedTranscriptions.get("beckett.wav", cliDefaults: true).events.speech
        for chunk in [320, 4999] {
            let detector = try SharedEngine.get(cliDefaults: true).makeSpeechDetector()
            var events: [TranscriberEvent] = []
            var start = 0
            let floats = audio.floats
            while start < floats.count {
                events += detector.accept(Array(floats[start..<min(floats.count, start + chunk)]))
                start += chunk
            }
            events += detector.finish()
            #expect(events.speech.map(\.started) == recognized.map(\.started))
            #expect(events.speech.map(\.at) == recognized.map(\.at))
        }
    }
}
