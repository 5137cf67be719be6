import StenoCore

/// Turns the bytes of one PCM audio message into mono `Float` samples in -1...1.
///
/// - `pcm_s16le`: a sample `s` becomes `s / 32768`, so -32768 maps to exactly -1 and
///   32767 to 0.99997 (the usual, symmetric-step mapping; no sample ever exceeds ±1).
/// - `pcm_f32le`: NaN becomes 0; ±Inf and values outside -1...1 are clamped to ±1.
///   Each channel is sanitized before the downmix, so one bad channel cannot poison the other.
/// - Stereo is downmixed by averaging the two channels.
///
/// A message must hold a whole number of sample frames (all channels); anything else is
/// rejected as a whole with `bad_audio` and nothing is converted.
///
/// The converter is a small value type with no state between messages; it works straight
/// on the raw bytes (unaligned little-endian loads), without per-sample allocation.
public struct PCMConverter: Sendable, Hashable {
    /// `.pcmS16LE` or `.pcmF32LE`.
    public let encoding: AudioEncoding
    /// 1 or 2.
    public let channels: Int
    /// Bytes per sample of one channel (2 or 4).
    public let bytesPerSample: Int

    /// A converter for a validated PCM format. Throws `unsupported_audio` for Opus.
    public init(format: AudioFormat) throws(StenoError) {
        try self.init(encoding: format.encoding, channels: format.channels)
    }

    /// A converter for a PCM encoding and 1 or 2 channels; throws `unsupported_audio` otherwise.
    public init(encoding: AudioEncoding, channels: Int) throws(StenoError) {
        switch encoding {
        case .pcmS16LE: bytesPerSample = 2
        case .pcmF32LE: bytesPerSample = 4
        case .opus:
            throw StenoError(.unsupportedAudio, "Opus packets are not PCM; use OpusDecoder")
        }
        guard channels == 1 || channels == 2 else {
            throw StenoError(.unsupportedAudio, "channels must be 1 or 2, not \(channels)")
        }
        self.encoding = encoding
        self.channels = channels
    }

    /// Bytes in one sample frame (all channels).
    public var bytesPerFrame: Int { bytesPerSample * channels }

    /// The number of sample frames in a message of `byteCount` bytes.
    /// Throws `bad_audio` when the bytes are not a whole number of frames.
    public func frameCount(byteCount: Int) throws(StenoError) -> Int {
        let (frames, rest) = byteCount.quotientAndRemainder(dividingBy: bytesPerFrame)
        guard rest == 0, byteCount >= 0 else {
            throw StenoError(.badAudio,
                "a \(encoding.rawValue) \(channels == 1 ? "mono" : "stereo") message must hold whole "
                + "\(bytesPerFrame)-byte sample frames; got \(byteCount) bytes")
        }
        return frames
    }

    /// Converts `bytes` into `output`, which must have room for `frameCount(byteCount:)`
    /// samples; returns the number written. Throws `bad_audio` (writing nothing) when the
    /// message is not frame-aligned or `output` is too small.
    public func convert(_ bytes: UnsafeRawBufferPointer,
                        into output: UnsafeMutableBufferPointer<Float>) throws(StenoError) -> Int {
        let frames = try frameCount(byteCount: bytes.count)
        guard frames > 0, let src = bytes.baseAddress, let dst = output.baseAddress else { return 0 }
        guard output.count >= frames else {
            throw StenoError(.internal, "PCM output buffer holds \(output.count) samples, \(frames) needed")
        }
        switch (encoding, channels) {
        case (.pcmS16LE, 1): Self.s16Mono(src, dst, frames)
        case (.pcmS16LE, _): Self.s16Stereo(src, dst, frames)
        case (_, 1): Self.f32Mono(src, dst, frames)
        default: Self.f32Stereo(src, dst, frames)
        }
        return frames
    }

    /// Converts `bytes` and appends the samples to `output`; returns how many were appended.
    /// Throws `bad_audio` (appending nothing) when the message is not frame-aligned.
    @discardableResult
    public func append(_ bytes: UnsafeRawBufferPointer, to output: inout [Float]) throws(StenoError) -> Int {
        let frames = try frameCount(byteCount: bytes.count)
        guard frames > 0 else { return 0 }
        let start = output.count
        // Grow by `frames` zeros, then overwrite them; a single memset is cheaper than any
        // per-sample append, and Array offers no way to append uninitialized storage.
        output.append(contentsOf: repeatElement(0, count: frames))
        let written = output.withUnsafeMutableBufferPointer { all in
            Result { () throws(StenoError) -> Int in
                try convert(bytes, into: UnsafeMutableBufferPointer(rebasing: all[start...]))
            }
        }
        // convert cannot fail here (alignment was checked, the room was made), but never trap.
        guard case .success(let count) = written else {
            output.removeLast(frames)
            return try written.get()
        }
        return count
    }

    /// Converts one message into a new array of mono samples.
    public func convert(_ bytes: UnsafeRawBufferPointer) throws(StenoError) -> [Float] {
        let frames = try frameCount(byteCount: bytes.count)
        var failure: StenoError?
        let result = [Float](unsafeUninitializedCapacity: frames) { buffer, count in
            do throws(StenoError) { count = try convert(bytes, into: buffer) } catch { failure = error; count = 0 }
        }
        if let failure { throw failure }
        return result
    }

    /// Converts one message held in a byte array.
    public func convert(_ bytes: [UInt8]) throws(StenoError) -> [Float] {
        // withUnsafeBytes rethrows untyped errors; carry the typed one out in a Result.
        try bytes.withUnsafeBytes { raw in Result { () throws(StenoError) in try convert(raw) } }.get()
    }

    // MARK: - Kernels (tight loops over raw memory; the compiler vectorizes them)

    private static let s16Scale: Float = 1.0 / 32768.0

    @inline(__always)
    private static func s16(_ src: UnsafeRawPointer, _ index: Int) -> Float {
        Float(Int16(littleEndian: src.loadUnaligned(fromByteOffset: index &* 2, as: Int16.self)))
    }

    @inline(__always)
    private static func f32(_ src: UnsafeRawPointer, _ index: Int) -> Float {
        Float(bitPattern: UInt32(littleEndian: src.loadUnaligned(fromByteOffset: index &* 4, as: UInt32.self)))
    }

    /// NaN → 0, anything beyond ±1 (including ±Inf) → ±1. Written with comparisons only
    /// (NaN fails both), so the loop stays branch-free.
    @inline(__always)
    public static func sanitize(_ x: Float) -> Float {
        let low: Float = x < -1 ? -1 : x
        let clamped: Float = low > 1 ? 1 : low
        return clamped == clamped ? clamped : 0
    }

    private static func s16Mono(_ src: UnsafeRawPointer, _ dst: UnsafeMutablePointer<Float>, _ frames: Int) {
        for i in 0..<frames { dst[i] = s16(src, i) * s16Scale }
    }

    private static func s16Stereo(_ src: UnsafeRawPointer, _ dst: UnsafeMutablePointer<Float>, _ frames: Int) {
        let scale = s16Scale * 0.5
        for i in 0..<frames { dst[i] = (s16(src, 2 &* i) + s16(src, 2 &* i &+ 1)) * scale }
    }

    private static func f32Mono(_ src: UnsafeRawPointer, _ dst: UnsafeMutablePointer<Float>, _ frames: Int) {
        for i in 0..<frames { dst[i] = sanitize(f32(src, i)) }
    }

    private static func f32Stereo(_ src: UnsafeRawPointer, _ dst: UnsafeMutablePointer<Float>, _ frames: Int) {
        for i in 0..<frames {
            dst[i] = (sanitize(f32(src, 2 &* i)) + sanitize(f32(src, 2 &* i &+ 1))) * 0.5
        }
    }
}
