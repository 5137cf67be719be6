import StenoCore

#if canImport(Glibc)
import Glibc
#endif

/// A WAV file's audio as interleaved Float samples, read from or written to RIFF/WAVE.
///
/// Reading takes PCM (8, 16, 24, 32-bit integer) and IEEE float (32, 64-bit) samples, plain or
/// `WAVE_FORMAT_EXTENSIBLE`, mono or stereo, at 8–48 kHz (what a session can declare). A data chunk
/// that claims more bytes than the file has, or 0 (a recording cut short, or a streamed WAV with a
/// placeholder size), is read up to the last whole sample frame. Anything else that is wrong gives a
/// `StenoError` that says what: `bad_audio` for a damaged or foreign file, `unsupported_audio` for a
/// real WAV the server cannot take. Writing produces 16-bit PCM.
///
/// `steno transcribe` sends a file through the session pipeline as `pcm_f32le` (`wireFormat`,
/// `f32leBytes`): 16-bit samples survive that conversion exactly.
public struct WAVFile: Sendable, Equatable {
    /// Sample rate in Hz.
    public var sampleRate: Int
    /// Channels (interleaved in `samples`).
    public var channels: Int
    /// Interleaved samples, nominally in -1...1 (s16 `s` is read as `s / 32768`).
    public var samples: [Float]

    public init(sampleRate: Int, channels: Int, samples: [Float]) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.samples = samples
    }

    /// Sample frames (samples per channel).
    public var frameCount: Int { channels > 0 ? samples.count / channels : 0 }
    /// Length in seconds.
    public var duration: Double { sampleRate > 0 ? Double(frameCount) / Double(sampleRate) : 0 }

    /// The channels averaged into one.
    public var mono: [Float] {
        guard channels == 2 else { return samples }
        return (0..<frameCount).map { (samples[2 * $0] + samples[2 * $0 + 1]) * 0.5 }
    }

    /// The format to declare when sending `f32leBytes` to a session.
    public func wireFormat() throws(StenoError) -> AudioFormat {
        try AudioFormat(encoding: .pcmF32LE, sampleRate: sampleRate, channels: channels)
    }

    // MARK: Reading

    /// Reads and parses a file.
    public init(path: String) throws(StenoError) {
        guard let file = fopen(path, "rb") else {
            throw StenoError(.badAudio, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if n > 0 { bytes.append(contentsOf: chunk[0..<n]) }
            if n < chunk.count { break }
        }
        if ferror(file) != 0 {
            throw StenoError(.badAudio, "cannot read \(path)")
        }
        try self.init(bytes: bytes)
    }

    /// Parses a WAV file held in memory.
    public init(bytes: [UInt8]) throws(StenoError) {
        // A complete file: a header that needs more bytes is a truncated one, so never nil.
        guard let header = try WAVHeader.parse(bytes, complete: true) else {
            throw StenoError(.badAudio, "truncated WAV header")
        }
        let available = bytes.count - header.dataOffset
        let size = header.dataSize.map { min($0, available) } ?? available
        let whole = size / header.bytesPerFrame * header.bytesPerFrame
        let samples = bytes.withUnsafeBytes { raw in
            header.decode(UnsafeRawBufferPointer(rebasing: raw[header.dataOffset..<(header.dataOffset + whole)]))
        }
        self.init(sampleRate: header.sampleRate, channels: header.channels, samples: samples)
    }

    // MARK: Writing

    /// The samples as interleaved 16-bit little-endian PCM (scaled by 32768, rounded, clipped).
    public var s16leBytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: samples.count * 2)
        for (i, sample) in samples.enumerated() {
            let scaled = PCMConverter.sanitize(sample) * 32768
            let value = Int16(max(-32768, min(32767, scaled + (scaled < 0 ? -0.5 : 0.5))))
            out[2 * i] = UInt8(truncatingIfNeeded: value)
            out[2 * i + 1] = UInt8(truncatingIfNeeded: value >> 8)
        }
        return out
    }

    /// The samples as interleaved 32-bit float little-endian PCM.
    public var f32leBytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: samples.count * 4)
        for (i, sample) in samples.enumerated() {
            let bits = sample.bitPattern
            for b in 0..<4 { out[4 * i + b] = UInt8(truncatingIfNeeded: bits >> (8 * b)) }
        }
        return out
    }

    /// A complete 16-bit PCM WAV file.
    public var wavBytes: [UInt8] {
        let data = s16leBytes
        var out = [UInt8]()
        out.reserveCapacity(44 + data.count)
        func put32(_ v: Int) { for s in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: v >> s)) } }
        func put16(_ v: Int) { out.append(UInt8(truncatingIfNeeded: v)); out.append(UInt8(truncatingIfNeeded: v >> 8)) }
        out += Array("RIFF".utf8); put32(36 + data.count); out += Array("WAVE".utf8)
        out += Array("fmt ".utf8); put32(16); put16(1); put16(channels); put32(sampleRate)
        put32(sampleRate * channels * 2); put16(channels * 2); put16(16)
        out += Array("data".utf8); put32(data.count)
        out += data
        return out
    }

    /// Writes a 16-bit PCM WAV file.
    public func write(path: String) throws(StenoError) {
        guard let file = fopen(path, "wb") else {
            throw StenoError(.internal, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        let bytes = wavBytes
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        guard written == bytes.count else { throw StenoError(.internal, "cannot write \(path)") }
    }
}
