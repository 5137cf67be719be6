import StenoCore

/// The header of a RIFF/WAVE file: the sample format and where the samples start. Parsed
/// from the whole file (`WAVFile`) or from the first bytes of a stream (`steno send -`
/// reading a pipe), which may not hold the whole header yet.
///
/// Takes PCM (8, 16, 24, 32-bit integer) and IEEE float (32, 64-bit) samples, plain or
/// `WAVE_FORMAT_EXTENSIBLE`, mono or stereo, at 8–48 kHz. Errors say what is wrong: `bad_audio`
/// for a damaged or foreign file, `unsupported_audio` for a real WAV a session cannot take.
public struct WAVHeader: Sendable, Equatable {
    public var sampleRate: Int
    public var channels: Int
    public var bitsPerSample: Int
    public var isFloat: Bool
    /// Where the samples start.
    public var dataOffset: Int
    /// Bytes of samples the header announces; nil when it does not say (0, or the
    /// 0xFFFFFFFF placeholder of a streamed file): the data runs to the end.
    public var dataSize: Int?

    public init(sampleRate: Int, channels: Int, bitsPerSample: Int, isFloat: Bool, dataOffset: Int = 0, dataSize: Int? = nil) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.bitsPerSample = bitsPerSample
        self.isFloat = isFloat
        self.dataOffset = dataOffset
        self.dataSize = dataSize
    }

    public var bytesPerSample: Int { bitsPerSample / 8 }
    public var bytesPerFrame: Int { bytesPerSample * channels }

    /// Parses the header at the start of `bytes`. With `complete` (the whole file), a header
    /// cut short is an error; otherwise it is nil: read more and try again.
    public static func parse(_ bytes: [UInt8], complete: Bool) throws(StenoError) -> WAVHeader? {
        if bytes.isEmpty {
            if complete { throw StenoError(.badAudio, "the file is empty") }
            return nil
        }
        let prefix = min(bytes.count, 4)
        if Array(bytes[0..<prefix]) != Array("RIFF".utf8.prefix(prefix)) {
            throw StenoError(.badAudio, "not a WAV file: no RIFF/WAVE header")
        }
        guard bytes.count >= 12 else {
            if complete {
                throw StenoError(.badAudio, "not a WAV file: too short for a RIFF header (\(bytes.count) bytes)")
            }
            return nil
        }
        guard tag(bytes, 8) == "WAVE" else {
            throw StenoError(.badAudio, "not a WAV file: no RIFF/WAVE header")
        }

        var offset = 12
        var fmt: (tag: Int, channels: Int, rate: Int, blockAlign: Int, bits: Int)?
        var data: (offset: Int, size: Int?)?
        while data == nil {
            guard offset + 8 <= bytes.count else {
                if !complete { return nil }
                break
            }
            let id = tag(bytes, offset)
            let size = Int(u32(bytes, offset + 4))
            let body = offset + 8
            switch id {
            case "fmt ":
                guard size >= 16 else { throw StenoError(.badAudio, "truncated WAV header: the fmt chunk is cut short") }
                guard body + 16 <= bytes.count else {
                    if !complete { return nil }
                    throw StenoError(.badAudio, "truncated WAV header: the fmt chunk is cut short")
                }
                var formatTag = Int(u16(bytes, body))
                let bits = Int(u16(bytes, body + 14))
                if formatTag == 0xFFFE {  // WAVE_FORMAT_EXTENSIBLE: the real format is the subformat GUID's first two bytes
                    guard size >= 40 else {
                        throw StenoError(.badAudio, "truncated WAV header: the extensible fmt chunk is cut short")
                    }
                    guard body + 26 <= bytes.count else {
                        if !complete { return nil }
                        throw StenoError(.badAudio, "truncated WAV header: the extensible fmt chunk is cut short")
                    }
                    formatTag = Int(u16(bytes, body + 24))
                }
                fmt = (formatTag, Int(u16(bytes, body + 2)), Int(u32(bytes, body + 4)), Int(u16(bytes, body + 12)), bits)
            case "data":
                guard fmt != nil else {
                    throw StenoError(.badAudio, "not a valid WAV file: the data chunk comes before fmt")
                }
                // A size of 0 or 0xFFFFFFFF is a placeholder left by a recorder that never came
                // back to fill it in (or could not: a pipe): the data runs to the end.
                data = (body, size == 0 || size == 0xFFFF_FFFF ? nil : size)
            default:
                break
            }
            // Chunks are padded to an even size.
            let (next, overflow) = body.addingReportingOverflow(size + (size & 1))
            if overflow { break }
            if data == nil { offset = next }
        }
        guard let fmt else { throw StenoError(.badAudio, "truncated WAV header: no fmt chunk") }
        guard let data else { throw StenoError(.badAudio, "not a valid WAV file: no data chunk") }

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
        let frameBytes = fmt.bits / 8 * fmt.channels
        guard fmt.blockAlign == frameBytes else {
            throw StenoError(.badAudio, "inconsistent WAV header: block align \(fmt.blockAlign), expected \(frameBytes)")
        }
        return WAVHeader(sampleRate: fmt.rate, channels: fmt.channels, bitsPerSample: fmt.bits, isFloat: isFloat,
                         dataOffset: data.offset, dataSize: data.size)
    }

    /// Whole sample frames of this format as interleaved Float (s16 `s` is `s / 32768`);
    /// a partial frame at the end is left out.
    public func decode(_ bytes: UnsafeRawBufferPointer) -> [Float] {
        let count = bytes.count / bytesPerFrame * channels
        let width = bytesPerSample
        var samples = [Float](repeating: 0, count: count)
        samples.withUnsafeMutableBufferPointer { dst in
            for i in 0..<count {
                let p = i * width
                func byte(_ k: Int) -> UInt32 { UInt32(bytes[p + k]) }
                switch (isFloat, width) {
                case (false, 1): dst[i] = (Float(bytes[p]) - 128) / 128
                case (false, 2): dst[i] = Float(Int16(bitPattern: UInt16(byte(0) | byte(1) << 8))) / 32768
                case (false, 3):
                    let raw = Int32(bitPattern: byte(0) << 8 | byte(1) << 16 | byte(2) << 24)
                    dst[i] = Float(raw >> 8) / 8_388_608
                case (false, _):
                    dst[i] = Float(Int32(bitPattern: byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24)) / 2_147_483_648
                case (true, 4): dst[i] = Float(bitPattern: byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24)
                case (true, _):
                    let low = UInt64(byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24)
                    let high = UInt64(byte(4) | byte(5) << 8 | byte(6) << 16 | byte(7) << 24)
                    dst[i] = Float(Double(bitPattern: low | high << 32))
                }
            }
        }
        return samples
    }

    static func tag(_ b: [UInt8], _ at: Int) -> String {
        guard at + 4 <= b.count else { return "" }
        return String(decoding: b[at..<at + 4], as: UTF8.self)
    }

    static func u16(_ b: [UInt8], _ at: Int) -> UInt16 {
        guard at + 2 <= b.count else { return 0 }
        return UInt16(b[at]) | UInt16(b[at + 1]) << 8
    }

    static func u32(_ b: [UInt8], _ at: Int) -> UInt32 {
        guard at + 4 <= b.count else { return 0 }
        return UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24
    }
}
