import StenoAudio
import Testing

/// SilenceSuppressor's rules on a made-up signal. The JS port (web-client/steno-client.js,
/// Tests/browser/unit_silence.test.mjs) is checked against the same signal and the same answer.
@Suite struct SilenceSuppressorTests {
    /// 0.5 s of quiet noise, 1 s loud, 3 s quiet, 1 s loud, 12 s quiet, at 16 kHz: the
    /// samples computed in Double and rounded to Float once, as JS's Float32Array does.
    static func signal() -> [Float] {
        let rate = 16000
        var out: [Float] = []
        var state: UInt32 = 12345
        func quiet(_ seconds: Double) {
            for _ in 0..<Int(seconds * Double(rate)) {
                state = state &* 1664525 &+ 1013904223
                out.append(Float(Double(Int(state >> 16) % 2001 - 1000) / 1000 * 0.0005))
            }
        }
        func loud(_ seconds: Double) {
            for i in 0..<Int(seconds * Double(rate)) { out.append((i / 20) % 2 == 0 ? 0.3 : -0.3) }
        }
        quiet(0.5); loud(1); quiet(3); loud(1); quiet(12)
        return out
    }

    /// What comes out, as sample counts: audio positive (consecutive pieces added up), silence
    /// negative.
    static func run(_ samples: [Float], chunk: Int) -> [Int] {
        var suppressor = SilenceSuppressor(sampleRate: 16000)
        var outputs: [SilenceSuppressor.Output] = []
        var i = 0
        while i < samples.count {
            outputs += suppressor.push(Array(samples[i..<min(samples.count, i + chunk)]))
            i += chunk
        }
        outputs += suppressor.finish()
        var counts: [Int] = []
        for output in outputs {
            switch output {
            case .audio(let audio):
                if let last = counts.last, last > 0 { counts[counts.count - 1] += audio.count } else { counts.append(audio.count) }
            case .silence(let seconds):
                counts.append(-Int((seconds * 16000).rounded()))
            }
        }
        return counts
    }

    @Test func pausesAreLeftOutAfterTheHangoverDeclaredAsTheyGoAndThePrerollIsSentAgain() {
        // Sent: 0.5 s quiet, 1 s loud, 1.3 s of the pause (hangover and pre-roll). Left out:
        // 0.1 s at once, then 1.1 s declared when speech resumes, whose last 0.5 s is sent
        // again before it. The 12 s pause: 0.1 s, 5 s, 5 s, and the rest at the end.
        let expected = [44800, -1600, -17600, 44800, -1600, -80000, -80000, -9600]
        let samples = Self.signal()
        for chunk in [333, 160, 4096] { #expect(Self.run(samples, chunk: chunk) == expected, "chunks of \(chunk)") }
        #expect(expected.map(abs).reduce(0, +) == samples.count)
    }
}
