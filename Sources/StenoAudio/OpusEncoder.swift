import COpus
import COpusShims
import StenoCore

/// libopus' encoder for speech: mono, fixed-length frames (20 ms by default), one packet per
/// frame, as `steno send` puts them on the wire (one Opus packet per binary message).
///
/// Not thread-safe: use one encoder from one thread.
public final class OpusEncoder {
    public let sampleRate: Int
    /// Samples per frame (20 ms: `sampleRate / 50`).
    public let frameSamples: Int
    private let encoder: OpaquePointer
    private var packet = [UInt8](repeating: 0, count: 4000)

    /// An encoder at `sampleRate` (8/12/16/24/48 kHz) with `frameMilliseconds` frames
    /// (10, 20, 40 or 60) and a target of `bitrate` bits per second. With
    /// `discontinuousTransmission` (DTX), frames the encoder finds inactive come out as packets
    /// of one or two bytes (which still say how long they last). `voice`: libopus' VoIP
    /// application (tuned for a voice's intelligibility), else its general audio one.
    public init(sampleRate: Int, frameMilliseconds: Int = 20, bitrate: Int = 32_000,
                discontinuousTransmission: Bool = false, voice: Bool = true) throws(StenoError) {
        guard AudioFormat.opusRates.contains(sampleRate) else {
            throw StenoError(.unsupportedAudio, "Opus encodes at 8000, 12000, 16000, 24000 or 48000 Hz, not \(sampleRate)")
        }
        guard [10, 20, 40, 60].contains(frameMilliseconds) else {
            throw StenoError(.unsupportedAudio, "Opus frames of \(frameMilliseconds) ms: use 10, 20, 40 or 60")
        }
        var error: Int32 = 0
        guard let encoder = opus_encoder_create(Int32(sampleRate), 1, voice ? OPUS_APPLICATION_VOIP : OPUS_APPLICATION_AUDIO, &error), error == OPUS_OK else {
            throw StenoError(.internal, "opus_encoder_create failed: \(String(cString: opus_strerror(error)))")
        }
        self.encoder = encoder
        self.sampleRate = sampleRate
        self.frameSamples = sampleRate * frameMilliseconds / 1000
        _ = steno_opus_encoder_set_bitrate(encoder, Int32(clamping: bitrate))
        if discontinuousTransmission { _ = steno_opus_encoder_set_dtx(encoder, 1) }
    }

    deinit { opus_encoder_destroy(encoder) }

    /// Encodes one frame of mono samples: exactly `frameSamples` of them (fewer are padded
    /// with silence). Returns the packet.
    public func encode(_ samples: ArraySlice<Float>) throws(StenoError) -> [UInt8] {
        var frame = [Float](samples.prefix(frameSamples))
        if frame.count < frameSamples { frame += [Float](repeating: 0, count: frameSamples - frame.count) }
        let capacity = Int32(packet.count)
        let length = frame.withUnsafeBufferPointer { input in
            packet.withUnsafeMutableBufferPointer { output in
                opus_encode_float(encoder, input.baseAddress!, Int32(frameSamples), output.baseAddress!, capacity)
            }
        }
        guard length > 0 else {
            throw StenoError(.internal, "opus_encode_float failed: \(String(cString: opus_strerror(length)))")
        }
        return Array(packet[0..<Int(length)])
    }
}
