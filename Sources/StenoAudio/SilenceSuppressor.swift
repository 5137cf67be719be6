import Foundation

/// What a client streams when it leaves out silence: audio to send, or a stretch of silence to
/// declare instead (`{"type":"silence","duration":D}`), so that the server's timeline stays
/// that of the whole input while a quiet client sends (almost) nothing.
///
/// It keeps sending through pauses shorter than `hangover` plus `preroll` (the recognizer needs
/// ≈0.5 s of silence to end an utterance, and hears that silence as it would without
/// suppression), and before speech resumes it sends the last `preroll` of the silence again
/// (the recognizer's detector keeps 0.2 s of audio from before speech starts, and a word's
/// onset is quiet). Loudness is judged per 10 ms frame against a noise floor it tracks itself
/// (the quietest recent frames), so it needs no setting for the microphone's level.
///
/// What it leaves out it declares as it goes, not only when speech resumes: the first
/// `declareAfter` of a pause at once (so the server knows the pause is meant: audio that just
/// stops in the middle of an utterance is cut there after the server's `--stall-seconds`),
/// then every `declareEvery` (so a long pause keeps the session from looking idle, and the
/// server's timeline current). Consecutive silences are one silence on the server's timeline.
///
/// A value type with no I/O and no clock: feed it samples (any chunking), take what it gives.
public struct SilenceSuppressor: Sendable {
    public enum Output: Sendable, Equatable {
        /// Send these samples.
        case audio([Float])
        /// Declare this many seconds of silence instead of sending them.
        case silence(Double)
    }

    public let sampleRate: Int
    /// Quiet time after the last loud frame that is still sent (seconds).
    public let hangover: Double
    /// Quiet time sent again before speech resumes (seconds).
    public let preroll: Double
    /// A frame this far above the noise floor is loud (dB).
    public let margin: Double
    /// Frames below this are quiet whatever the floor (dBFS).
    public let absoluteQuiet: Double
    /// Silence left out that is declared at once in a pause, then how much at a time (seconds).
    public let declareAfter: Double
    public let declareEvery: Double

    private let frameSamples: Int
    private var frame: [Float] = []
    private var floor: Double?
    /// Quiet frames since the last loud one.
    private var quietFrames = 0
    /// Whether frames are being left out now.
    private var suppressing = false
    /// While suppressing: the last `preroll` of quiet frames, and how many frames were left
    /// out before them.
    private var held: [[Float]] = []
    private var skippedFrames = 0
    /// Some of this pause was declared already.
    private var declaredInPause = false

    public init(sampleRate: Int, hangover: Double = 0.8, preroll: Double = 0.5,
                margin: Double = 10, absoluteQuiet: Double = -65,
                declareAfter: Double = 0.1, declareEvery: Double = 5) {
        self.sampleRate = max(1, sampleRate)
        self.hangover = hangover
        self.preroll = preroll
        self.margin = margin
        self.absoluteQuiet = absoluteQuiet
        self.declareAfter = declareAfter
        self.declareEvery = declareEvery
        frameSamples = max(1, self.sampleRate / 100)
    }

    /// Takes samples; returns what to send or declare, in order.
    public mutating func push(_ samples: [Float]) -> [Output] {
        var out: [Output] = []
        var sendable: [Float] = []
        for sample in samples {
            frame.append(sample)
            if frame.count == frameSamples {
                take(frame, sending: &sendable, into: &out)
                frame.removeAll(keepingCapacity: true)
            }
        }
        if !sendable.isEmpty { out.append(.audio(sendable)) }
        return out
    }

    /// End of input: what is held goes out (as silence while suppressing).
    public mutating func finish() -> [Output] {
        var out: [Output] = []
        if suppressing {
            let frames = skippedFrames + held.count
            held.removeAll()
            skippedFrames = 0
            if frames > 0 { out.append(.silence(seconds(frames: frames))) }
            if !frame.isEmpty { out.append(.silence(Double(frame.count) / Double(sampleRate))) }
        } else if !frame.isEmpty {
            out.append(.audio(frame))
        }
        frame.removeAll()
        return out
    }

    private mutating func take(_ frame: [Float], sending: inout [Float], into out: inout [Output]) {
        let loud = isLoud(frame)
        if loud {
            quietFrames = 0
            if suppressing {
                // Speech again: declare what was left out, send the pre-roll, go on sending.
                suppressing = false
                declaredInPause = false
                if skippedFrames > 0 { out.append(.silence(seconds(frames: skippedFrames))) }
                skippedFrames = 0
                sending = held.flatMap { $0 }
                held.removeAll()
            }
            sending += frame
            return
        }
        quietFrames += 1
        if !suppressing && Double(quietFrames) * 0.01 > hangover + preroll {
            suppressing = true
            if !sending.isEmpty {
                out.append(.audio(sending))
                sending.removeAll()
            }
        }
        guard suppressing else {
            sending += frame
            return
        }
        held.append(frame)
        let keep = Int((preroll * 100).rounded())
        if held.count > keep {
            held.removeFirst(held.count - keep)
            skippedFrames += 1
            // Declared as it goes: soon after the pause begins, then now and then.
            let due = max(1, Int(((declaredInPause ? declareEvery : declareAfter) * 100).rounded()))
            if skippedFrames >= due {
                out.append(.silence(seconds(frames: skippedFrames)))
                skippedFrames = 0
                declaredInPause = true
            }
        }
    }

    private mutating func isLoud(_ frame: [Float]) -> Bool {
        var energy = 0.0
        for sample in frame { energy += Double(sample) * Double(sample) }
        let rms = (energy / Double(frame.count)).squareRoot()
        let level = rms > 0 ? 20 * log10(rms) : -200
        // The floor follows the quietest frames down at once and rises slowly (5 dB/s).
        let current = floor ?? level
        floor = level < current ? level : current + 0.05
        return level >= absoluteQuiet && level >= (floor ?? level) + margin
    }

    private func seconds(frames: Int) -> Double { Double(frames * frameSamples) / Double(sampleRate) }
}
