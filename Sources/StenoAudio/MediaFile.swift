import CAVShims

/// An audio file in any container and codec FFmpeg (Debian's libavformat and libavcodec) reads
/// — WAV, FLAC, Ogg/Opus, MP3, M4A, WebM — decoded whole to mono samples, for the files posted
/// to the OpenAI-compatible `/v1/audio/transcriptions`.
public enum MediaFile {
    /// Why a file was not decoded.
    public enum Failure: Error, Sendable, Equatable {
        /// Not audio FFmpeg can read (the reason in plain words).
        case unreadable(String)
        /// Longer than the limit given.
        case tooLong
    }

    /// The file's audio, mixed to mono at `sampleRate`; at most `maxSeconds` (0: no limit).
    public static func decode(_ bytes: [UInt8], sampleRate: Int, maxSeconds: Double = 0) throws(Failure) -> [Float] {
        var samples: UnsafeMutablePointer<Float>?
        var count = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = bytes.withUnsafeBufferPointer { buffer in
            steno_av_decode(buffer.baseAddress, buffer.count, Int32(sampleRate), maxSeconds, &samples, &count,
                            &message, message.count)
        }
        switch status {
        case 0:
            defer { steno_av_free(samples) }
            return samples.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
        case -2:
            throw .tooLong
        default:
            throw .unreadable(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }
}
