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
        if bytes.isEmpty { throw StenoError(.badAudio, "the file is empty") }
        guard bytes.count >= 12 else {
            throw StenoError(.badAudio, "not a WAV file: too short for a RIFF header (\(bytes.count) bytes)")
        }
        guard Self.tag(bytes, 0) == "RIFF", Self.tag(bytes, 8) == "WAVE" else {
            throw StenoError(.badAudio, "not a WAV file: no RIFF/WAVE header")
        }

        var offset = 12
        var fmt: (tag: Int, channels: Int, rate: Int, blockAlign: Int, bits: Int)?
        var dataRange: Range<Int>?
        while offset + 8 <= bytes.count, dataRange == nil {
            let id = Self.tag(bytes, offset)
            let size = Int(Self.u32(bytes, offset + 4))
            let body = offset + 8
            switch id {
            case "fmt ":
                guard size >= 16, body + 16 <= bytes.count else {
                    throw StenoError(.badAudio, "truncated WAV header: the fmt chunk is cut short")
                }
                var tag = Int(Self.u16(bytes, body))
                let bits = Int(Self.u16(bytes, body + 14))
                if tag == 0xFFFE {  // WAVE_FORMAT_EXTENSIBLE: the real format is the subformat GUID's first two bytes
                    guard size >= 40, body + 26 <= bytes.count else {
                        throw StenoError(.badAudio, "truncated WAV header: the extensible fmt chunk is cut short")
                    }
                    tag = Int(Self.u16(bytes, body + 24))
                }
                fmt = (tag, Int(Self.u16(bytes, body + 2)), Int(Self.u32(bytes, body + 4)),
                       Int(Self.u16(bytes, body + 12)), bits)
            case "data":
                guard fmt != nil else {
                    throw StenoError(.badAudio, "not a valid WAV file: the data chunk comes before fmt")
                }
                // A size of 0 or past the end is a placeholder left by a recorder that never came back
                // to fill it in: the data runs to the end of the file.
                let end = (size == 0 || size > bytes.count - body) ? bytes.count : body + size
                dataRange = body..<max(body, end)
            default:
                break
            }
            // Chunks are padded to an even size.
            let (next, overflow) = body.addingReportingOverflow(size + (size & 1))
            if overflow { break }
            offset = next
        }
        guard let fmt else { throw StenoError(.badAudio, "truncated WAV header: no fmt chunk") }
        guard let dataRange else { throw StenoError(.badAudio, "not a valid WAV file: no data chunk") }

        let isFloat: Bool
        switch (fmt.tag, fmt.bits) {
        case (1, 8), (1, 16), (1, 24), (1, 32): isFloat = false
        case (3, 32), (3, 64): isFloat = true
        default:
            throw StenoError(.unsupportedAudio,
                "unsupported WAV sample format (format tag \(fmt.tag), \(fmt.bits) bits): use PCM or IEEE float")
        }
        guard fmt.channels == 1 || fmt.channels == 2 else {
            throw StenoError(.unsupportedAudio, "WAV files must be mono or stereo, not \(fmt.channels) channels")
        }
        guard AudioFormat.pcmRates.contains(fmt.rate) else {
            throw StenoError(.unsupportedAudio, "the WAV file's rate is \(fmt.rate) Hz; 8000-48000 Hz is supported")
        }
        let bytesPerSample = fmt.bits / 8
        let frameBytes = bytesPerSample * fmt.channels
        guard fmt.blockAlign == frameBytes else {
            throw StenoError(.badAudio, "inconsistent WAV header: block align \(fmt.blockAlign), expected \(frameBytes)")
        }

        let count = dataRange.count / frameBytes * fmt.channels
        var samples = [Float](repeating: 0, count: count)
        samples.withUnsafeMutableBufferPointer { dst in
            for i in 0..<count {
                let p = dataRange.lowerBound + i * bytesPerSample
                switch (isFloat, bytesPerSample) {
                case (false, 1): dst[i] = (Float(bytes[p]) - 128) / 128
                case (false, 2): dst[i] = Float(Int16(bitPattern: Self.u16(bytes, p))) / 32768
                case (false, 3):
                    let raw = Int32(bytes[p]) << 8 | Int32(bytes[p + 1]) << 16 | Int32(bytes[p + 2]) << 24
                    dst[i] = Float(raw >> 8) / 8_388_608
                case (false, _): dst[i] = Float(Int32(bitPattern: Self.u32(bytes, p))) / 2_147_483_648
                case (true, 4): dst[i] = Float(bitPattern: Self.u32(bytes, p))
                case (true, _):
                    dst[i] = Float(Double(bitPattern: UInt64(Self.u32(bytes, p)) | UInt64(Self.u32(bytes, p + 4)) << 32))
                }
            }
        }
        self.init(sampleRate: fmt.rate, channels: fmt.channels, samples: samples)
    }

    private static func tag(_ b: [UInt8], _ at: Int) -> String {
        guard at + 4 <= b.count else { return "" }
        return String(decoding: b[at..<at + 4], as: UTF8.self)
    }

    private static func u16(_ b: [UInt8], _ at: Int) -> UInt16 {
        guard at + 2 <= b.count else { return 0 }
        return UInt16(b[at]) | UInt16(b[at + 1]) << 8
    }

    private static func u32(_ b: [UInt8], _ at: Int) -> UInt32 {
        guard at + 4 <= b.count else { return 0 }
        return UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24
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
