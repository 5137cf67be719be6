import Foundation
import StenoCore
import StenoSpeech

/// Audio the Whisper recognizer's tests feed besides speech, and a detector scripted to hear speech.

/// A detector that hears speech from `sample` on, to the end.
final class SpeechFrom: VoiceDetector {
    private let sample: Int
    private var fed = 0
    init(sample: Int) { self.sample = sample }
    var decidedSamples: Int { fed }

    func accept(_ samples: UnsafeBufferPointer<Float>) -> [TranscriberEvent] {
        defer { fed += samples.count }
        return fed <= sample && fed + samples.count > sample ? [.speechStarted(at: Double(sample) / 16_000)] : []
    }
}

/// Deterministic noise and sounds with no speech in them.
enum NotSpeech {
    static func silence(_ seconds: Double) -> [Float] { [Float](repeating: 0, count: Int(seconds * 16_000)) }

    /// Pink noise (Paul Kellet's filter over a fixed white sequence) at about -20 dBFS.
    static func pinkNoise(_ seconds: Double) -> [Float] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var b = [Float](repeating: 0, count: 3)
        return (0..<Int(seconds * 16_000)).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let white = Float(Int64(bitPattern: state) >> 11) / Float(1 << 52)
            b[0] = 0.99765 * b[0] + white * 0.0990460
            b[1] = 0.96300 * b[1] + white * 0.2965164
            b[2] = 0.57000 * b[2] + white * 1.0526913
            return (b[0] + b[1] + b[2] + white * 0.1848) * 0.05
        }
    }

    /// Tones like a melody: half-second notes of a scale, with harmonics.
    static func tones(_ seconds: Double) -> [Float] {
        let notes: [Float] = [261.6, 293.7, 329.6, 349.2, 392.0, 440.0, 493.9, 523.3]
        return (0..<Int(seconds * 16_000)).map { i in
            let f = notes[(i / 8_000) % notes.count]
            let t = Float(i) / 16_000
            return 0.2 * sin(2 * .pi * f * t) + 0.08 * sin(4 * .pi * f * t) + 0.04 * sin(6 * .pi * f * t)
        }
    }

    /// A door slam: a loud decaying burst of noise, then quiet, every two seconds.
    static func slams(_ seconds: Double) -> [Float] {
        var state: UInt64 = 42
        return (0..<Int(seconds * 16_000)).map { i in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let white = Float(Int64(bitPattern: state) >> 11) / Float(1 << 52)
            let since = Float(i % 32_000) / 16_000
            return white * 0.9 * exp(-since * 25)
        }
    }
}
