import StenoAudio
import StenoCore

/// What a sender's audio looks like before it is encoded: interleaved Float samples.
struct CapturedFormat: Sendable, Equatable {
    var sampleRate: Int
    var channels: Int
    /// The samples were 16-bit integers (a PCM stream can then go as `pcm_s16le` without
    /// losing anything, at half the bytes of float).
    var isSixteenBit: Bool
}

/// How `steno send` puts audio on the wire.
enum WireEncoding: String, CaseIterable, Sendable {
    /// Opus packets, 20 ms each (mono; other rates are resampled to 48 kHz first).
    case opus
    /// PCM pieces of 20 ms: 16-bit when the input was, else 32-bit float.
    case pcm
}

/// Turns captured samples into frames on the sender's timeline: 20 ms each, so that a
/// resumed connection can start again at any frame the server says it has. With
/// `suppressingSilence`, the frames `SilenceGate` leaves out become one silence frame per run
/// (no bytes: the sender declares it with `silence`), and are not encoded.
final class FrameEncoder {
    let format: AudioFormat
    private let input: CapturedFormat
    private let frameSamples: Int
    private var pending: [Float] = []
    /// Samples (per channel, at the wire rate) put in frames so far.
    private var written = 0
    private let opus: OpusEncoder?
    private let resampler: Resampler?
    /// A frame's samples (interleaved) wait here for the verdict on them.
    private var gate: SilenceGate<ArraySlice<Float>>?

    init(_ input: CapturedFormat, encoding: WireEncoding, suppressingSilence: Bool = false) throws(StenoError) {
        self.input = input
        switch encoding {
        case .opus:
            let rate = AudioFormat.opusRates.contains(input.sampleRate) ? input.sampleRate : 48_000
            resampler = rate == input.sampleRate ? nil : try Resampler(inputRate: input.sampleRate, outputRate: rate)
            // DTX: frames the encoder finds inactive become packets of a byte or two (still
            // sent, so that the server's timeline goes on), so the quiet that is still sent (the
            // hangover and pre-roll around speech, or everything with --no-silence-suppression)
            // costs little. Measured on 19.4 s with two 3.2 s bursts of speech: 67 kB → 33 kB
            // sent whole, 37 kB → 29 kB with silence left out; the same words, times within 10 ms.
            let encoder = try OpusEncoder(sampleRate: rate, discontinuousTransmission: true)
            opus = encoder
            frameSamples = encoder.frameSamples
            format = try AudioFormat(encoding: .opus, sampleRate: rate, channels: 1)
        case .pcm:
            opus = nil
            resampler = nil
            frameSamples = max(1, input.sampleRate / 50)
            format = try AudioFormat(encoding: input.isSixteenBit ? .pcmS16LE : .pcmF32LE,
                                     sampleRate: input.sampleRate, channels: input.channels)
        }
        if suppressingSilence { gate = SilenceGate(sampleRate: format.sampleRate) }
    }

    /// Whether silence is left out.
    var suppressesSilence: Bool { gate != nil }

    /// Frames made from `samples` (interleaved, the captured format); what does not fill a
    /// frame waits for more.
    func add(_ samples: [Float]) throws(StenoError) -> [AudioFrame] {
        var mono = samples
        if opus != nil {
            // No NaN or out-of-range value reaches the encoder.
            for i in mono.indices { mono[i] = PCMConverter.sanitize(mono[i]) }
            if input.channels == 2 {
                mono = stride(from: 0, to: samples.count - 1, by: 2).map { (samples[$0] + samples[$0 + 1]) * 0.5 }
            }
            if let resampler { mono = resampler.process(mono) }
        }
        pending += mono
        return try frames(final: false)
    }

    /// The frames left at the end of the input (the last one padded with silence for Opus,
    /// shorter for PCM).
    func finish() throws(StenoError) -> [AudioFrame] {
        if let resampler { pending += resampler.flush() }
        return try frames(final: true)
    }

    private func frames(final: Bool) throws(StenoError) -> [AudioFrame] {
        let channels = opus == nil ? input.channels : 1
        let step = frameSamples * channels
        var out: [AudioFrame] = []
        var offset = 0
        while pending.count - offset >= step || (final && pending.count > offset) {
            let take = min(step, pending.count - offset)
            let piece = pending[offset..<(offset + take)]
            offset += take
            if gate != nil {
                let mono = channels == 1 ? Array(piece)
                    : stride(from: piece.startIndex, to: piece.endIndex - 1, by: 2).map { (piece[$0] + piece[$0 + 1]) * 0.5 }
                for release in gate!.push(mono, payload: piece) { try self.release(release, into: &out) }
                continue
            }
            if let frame = try encode(piece, at: written) {
                written += frame.samples
                out.append(frame.frame)
            }
        }
        pending.removeFirst(offset)
        if final, gate != nil {
            for release in gate!.finish() { try self.release(release, into: &out) }
        }
        return out
    }

    private func release(_ release: SilenceGate<ArraySlice<Float>>.Release, into out: inout [AudioFrame]) throws(StenoError) {
        let rate = Double(format.sampleRate)
        switch release {
        case .send(let piece, let start, _):
            if let frame = try encode(piece, at: start) { out.append(frame.frame) }
        case .silence(let start, let length):
            out.append(AudioFrame(start: Double(start) / rate, duration: Double(length) / rate, bytes: [], isSilence: true))
        }
    }

    /// One frame of audio starting at sample `start` (per channel, at the wire rate), and how
    /// many samples it lasts.
    private func encode(_ piece: ArraySlice<Float>, at start: Int) throws(StenoError) -> (frame: AudioFrame, samples: Int)? {
        let channels = opus == nil ? input.channels : 1
        let bytes: [UInt8]
        let samples: Int
        if let opus {
            bytes = try opus.encode(piece)
            samples = frameSamples  // a short last frame is padded: it lasts a whole frame
        } else {
            samples = piece.count / channels
            bytes = format.encoding == .pcmS16LE ? Self.s16le(piece) : Self.f32le(piece)
        }
        guard samples > 0 else { return nil }
        let rate = Double(format.sampleRate)
        return (AudioFrame(start: Double(start) / rate, duration: Double(samples) / rate, bytes: bytes), samples)
    }

    static func s16le(_ samples: ArraySlice<Float>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: samples.count * 2)
        for (i, sample) in samples.enumerated() {
            let scaled = (sample.isFinite ? sample : 0) * 32768
            let value = Int16(max(-32768, min(32767, scaled.rounded())))
            out[2 * i] = UInt8(truncatingIfNeeded: value)
            out[2 * i + 1] = UInt8(truncatingIfNeeded: value >> 8)
        }
        return out
    }

    static func f32le(_ samples: ArraySlice<Float>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: samples.count * 4)
        for (i, sample) in samples.enumerated() {
            let bits = sample.bitPattern
            for b in 0..<4 { out[4 * i + b] = UInt8(truncatingIfNeeded: bits >> (8 * b)) }
        }
        return out
    }
}
