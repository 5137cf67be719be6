import StenoCore

#if canImport(Glibc)
import Glibc
#endif

/// A WAV file's audio, as the bytes of a wire PCM encoding (`pcm_s16le` or `pcm_f32le`) so that it
/// can go through the same pipeline as a client's audio.
///
/// Reads RIFF/WAVE with PCM (8, 16, 24, 32-bit integer) or IEEE float (32, 64-bit) samples, plain or
/// `WAVE_FORMAT_EXTENSIBLE`, mono or stereo, 8–48 kHz. 16-bit files keep their bytes; every other
/// sample type is converted to 32-bit float. A data chunk that claims more bytes than the file has
/// (a recording that was cut short, or a streamed WAV with a placeholder size) is read up to the
/// last whole sample frame. Everything else that is wrong gives a `StenoError` that says what.
public struct WAVFile: Sendable {
    /// The audio's format on the wire: encoding, rate and channels.
    public let format: AudioFormat
    /// Interleaved little-endian samples in `format.encoding`.
    public let data: [UInt8]

    /// Whole sample frames in `data`.
    public var frameCount: Int { data.count / (format.bytesPerFrame ?? 1) }
    /// Length in seconds.
    public var duration: Double { Double(frameCount) / Double(format.sampleRate) }

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
        let bytesPerSample = fmt.bits / 8
        let frameBytes = bytesPerSample * fmt.channels
        guard fmt.blockAlign == frameBytes else {
            throw StenoError(.badAudio, "inconsistent WAV header: block align \(fmt.blockAlign), expected \(frameBytes)")
        }

        let frames = dataRange.count / frameBytes
        let encoding: AudioEncoding = (fmt.tag == 1 && fmt.bits == 16) ? .pcmS16LE : .pcmF32LE
        let format = try AudioFormat(encoding: encoding, sampleRate: fmt.rate, channels: fmt.channels)

        if encoding == .pcmS16LE {
            data = Array(bytes[dataRange.lowerBound..<(dataRange.lowerBound + frames * frameBytes)])
        } else {
            let count = frames * fmt.channels
            var out = [UInt8](repeating: 0, count: count * 4)
            out.withUnsafeMutableBytes { dst in
                for i in 0..<count {
                    let p = dataRange.lowerBound + i * bytesPerSample
                    let value: Float
                    switch (isFloat, bytesPerSample) {
                    case (false, 1): value = (Float(bytes[p]) - 128) / 128
                    case (false, 3):
                        let raw = Int32(bytes[p]) << 8 | Int32(bytes[p + 1]) << 16 | Int32(bytes[p + 2]) << 24
                        value = Float(raw >> 8) / 8_388_608
                    case (false, _): value = Float(Int32(bitPattern: Self.u32(bytes, p))) / 2_147_483_648
                    case (true, 4): value = Float(bitPattern: Self.u32(bytes, p))
                    case (true, _):
                        value = Float(Double(bitPattern: UInt64(Self.u32(bytes, p)) | UInt64(Self.u32(bytes, p + 4)) << 32))
                    }
                    dst.storeBytes(of: value.bitPattern.littleEndian, toByteOffset: i * 4, as: UInt32.self)
                }
            }
            data = out
        }
        self.format = format
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
}
