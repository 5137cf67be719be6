/// The audio encodings a session may declare in `start`.
public enum AudioEncoding: String, Sendable, CaseIterable, Hashable {
    case pcmS16LE = "pcm_s16le"
    case pcmF32LE = "pcm_f32le"
    case opus = "opus"
}

/// A session's declared input: encoding, sample rate and channel count, validated.
public struct AudioFormat: Sendable, Hashable, CustomStringConvertible {
    public let encoding: AudioEncoding
    public let sampleRate: Int
    public let channels: Int

    /// Rates Opus can be declared (and decoded) at.
    public static let opusRates: Set<Int> = [8000, 12000, 16000, 24000, 48000]
    /// The PCM rate range, inclusive.
    public static let pcmRates: ClosedRange<Int> = 8000...48000

    /// Validates a declared format; throws `unsupported_audio` for anything the server cannot take.
    public init(encoding: AudioEncoding, sampleRate: Int, channels: Int) throws(StenoError) {
        guard channels == 1 || channels == 2 else {
            throw StenoError(.unsupportedAudio, "channels must be 1 or 2, not \(channels)")
        }
        switch encoding {
        case .pcmS16LE, .pcmF32LE:
            guard Self.pcmRates.contains(sampleRate) else {
                throw StenoError(.unsupportedAudio,
                    "PCM sample rate must be 8000-48000 Hz, not \(sampleRate)")
            }
        case .opus:
            guard Self.opusRates.contains(sampleRate) else {
                throw StenoError(.unsupportedAudio,
                    "Opus sample rate must be 8000, 12000, 16000, 24000 or 48000 Hz, not \(sampleRate)")
            }
        }
        self.encoding = encoding
        self.sampleRate = sampleRate
        self.channels = channels
    }

    /// Parses the wire name of an encoding; throws `unsupported_audio` for unknown names.
    public init(encodingName: String, sampleRate: Int, channels: Int) throws(StenoError) {
        guard let encoding = AudioEncoding(rawValue: encodingName) else {
            throw StenoError(.unsupportedAudio,
                "encoding must be pcm_s16le, pcm_f32le or opus, not \"\(encodingName)\"")
        }
        try self.init(encoding: encoding, sampleRate: sampleRate, channels: channels)
    }

    /// Bytes in one PCM sample frame (all channels); nil for Opus, whose frames are packets.
    public var bytesPerFrame: Int? {
        switch encoding {
        case .pcmS16LE: return 2 * channels
        case .pcmF32LE: return 4 * channels
        case .opus: return nil
        }
    }

    public var description: String { "\(encoding.rawValue) \(sampleRate) Hz \(channels == 1 ? "mono" : "stereo")" }
}
