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

    /// Steady white noise, `dBFS` RMS, from a fixed seed.
    static func noise(_ seconds: Double, dBFS: Double, seed: UInt64) -> [Float] {
        var state = seed
        let amplitude = Float(pow(10, dBFS / 20) * 3.0.squareRoot())  // uniform in ±a has RMS a/√3
        return (0..<Int(seconds * 16000)).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Float(Int64(bitPattern: state) >> 11) / Float(1 << 52) * amplitude
        }
    }

    static func speech(_ detector: PocketSphinxSpeechDetector, _ audio: [Float]) -> [(started: Bool, at: Double)] {
        (detector.accept(audio) + detector.finish()).speech.map { ($0.started, $0.at) }
    }

    /// A quiet room's hiss at any level looks like speech for the first half second of a stream
    /// to pocketsphinx's detector (its noise estimate starts at the first frame and rises
    /// slowly); settled on its first 0.64 s, the detector hears none in it.
    @Test(arguments: [-70.0, -60.0, -50.0, -40.0])
    func aSettledDetectorHearsNoSpeechInSteadyNoise(_ level: Double) throws {
        let engine = try SharedEngine.get(cliDefaults: true)
        for seed: UInt64 in [1, 2, 3] {
            let audio = Self.noise(5, dBFS: level, seed: seed)
            #expect(Self.speech(try engine.makeSpeechDetector(), audio).first?.at == 0, "unsettled, \(level) dBFS")
            #expect(Self.speech(try engine.makeSpeechDetector(settling: 0.64), audio).isEmpty, "\(level) dBFS")
        }
    }

    /// A detector that passes over blocks below −50 dBFS while no speech is open hears no
    /// speech in a quiet room either, and finds the speech that follows one where a detector
    /// that heard every block does, within 0.1 s (the noise estimate differs, and the front
    /// end's frames start again after each block passed over; the pre-roll of whoever gates
    /// utterances on it covers that).
    @Test func aQuietGatedDetectorFindsTheSpeechAfterAQuietRoom() throws {
        let engine = try SharedEngine.get(cliDefaults: true)
        for name in ["beckett.wav", "librivox/sense_and_sensibility_01_austen_64kb-0930.wav"] {
            let speech = try TestAudio.load(name).floats
            let room = Self.noise(3, dBFS: -60, seed: 7)
            let audio = room + zip(speech, Self.noise(Double(speech.count) / 16000 + 1, dBFS: -60, seed: 8)).map { $0 + $1 }
            let plain = Self.speech(try engine.makeSpeechDetector(settling: 0.64), audio)
            let gated = Self.speech(try engine.makeSpeechDetector(settling: 0.64, quietBelow: -50), audio)
            #expect(!plain.isEmpty, "\(name)")
            #expect(gated.map(\.started) == plain.map(\.started), "\(name)")
            for (a, b) in zip(gated, plain) { #expect(abs(a.at - b.at) <= 0.1, "\(name): \(a.at) vs \(b.at)") }
            #expect(gated.first.map { $0.at >= 2.9 } == true, "\(name): \(gated.prefix(4))")
            #expect(Self.speech(try engine.makeSpeechDetector(settling: 0.64, quietBelow: -50), room + room).isEmpty)
        }
    }

    /// Speech from the first sample is still found, at most a little after it starts (the
    /// pre-roll of whoever gates utterances on it covers that), and later changes of voice
    /// activity come where they did, give or take a frame or two (the noise estimate differs).
    @Test func aSettledDetectorFindsSpeechThatStartsAtOnce() throws {
        let engine = try SharedEngine.get(cliDefaults: true)
        for name in ["beckett.wav", "librivox/sense_and_sensibility_01_austen_64kb-0930.wav"] {
            let audio = try TestAudio.load(name).floats
            let onset = audio.firstIndex { abs($0) > 0.05 } ?? 0
            let abrupt = Array(audio[max(0, onset - 800)...])
            let plain = Self.speech(try engine.makeSpeechDetector(), abrupt)
            let settled = Self.speech(try engine.makeSpeechDetector(settling: 0.64), abrupt)
            #expect(settled.map(\.started) == plain.map(\.started), "\(name)")
            #expect(settled.first.map { $0.at <= 0.3 } == true, "\(name)")
            for (a, b) in zip(settled.dropFirst(), plain.dropFirst()) { #expect(abs(a.at - b.at) <= 0.03, "\(name)") }
        }
    }
}
