import Foundation
import StenoCore

/// A small RIFF/WAVE reader and writer for tests, benchmarks and tools: 16-bit integer or
/// 32-bit float PCM (plain or WAVE_FORMAT_EXTENSIBLE), any rate, 1 or 2 channels.
/// Not on the server's audio path. Malformed files throw `bad_audio`, never trap.
public struct WAVFile: Sendable, Equatable {
    /// Sample rate in Hz.
    public var sampleRate: Int
    /// Channels (interleaved in `samples`).
    public var channels: Int
    /// Interleaved samples in -1...1 (s16 `s` is read as `s / 32768`).
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

    /// Parses a whole WAV file.
    public init(bytes: [UInt8]) throws(StenoError) {
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        func tag(_ at: Int) -> String { String(decoding: bytes[at..<at + 4], as: UTF8.self) }
        guard bytes.count >= 12, tag(0) == "RIFF", tag(8) == "WAVE" else {
            throw StenoError(.badAudio, "not a RIFF/WAVE file")
        }
        var format: (code: Int, channels: Int, rate: Int, bits: Int)?
        var offset = 12
        while offset + 8 <= bytes.count {
            let id = tag(offset)
            let size = u32(offset + 4)
            let body = offset + 8
            // A streamed WAV may give its data chunk size as 0 or 0xFFFFFFFF: read to the end.
            let streamed = id == "data" && (size == 0 || size == 0xFFFF_FFFF)
            let end = streamed ? bytes.count : min(bytes.count, body + size)
            if id == "fmt " {
                guard end - body >= 16 else { throw StenoError(.badAudio, "WAV fmt chunk too short") }
                var code = u16(body)
                if code == 0xFFFE, end - body >= 26 { code = u16(body + 24) }  // extensible: sub-format
                format = (code, u16(body + 2), u32(body + 4), u16(body + 14))
            } else if id == "data" {
                guard let format else { throw StenoError(.badAudio, "WAV data before fmt") }
                guard format.channels == 1 || format.channels == 2, format.rate > 0 else {
                    throw StenoError(.badAudio, "WAV with \(format.channels) channels at \(format.rate) Hz")
                }
                let encoding: AudioEncoding
                switch (format.code, format.bits) {
                case (1, 16): encoding = .pcmS16LE
                case (3, 32): encoding = .pcmF32LE
                default:
                    throw StenoError(.badAudio, "WAV format \(format.code) with \(format.bits) bits is not supported")
                }
                let sampleBytes = format.bits / 8
                let usable = (end - body) / (sampleBytes * format.channels) * sampleBytes * format.channels
                // Interleaved samples: convert as mono, each channel sample on its own.
                let converter = try PCMConverter(encoding: encoding, channels: 1)
                let samples = try bytes[body..<body + usable].withUnsafeBytes { raw in
                    Result { () throws(StenoError) -> [Float] in try converter.convert(raw) }
                }.get()
                self.init(sampleRate: format.rate, channels: format.channels, samples: samples)
                return
            }
            offset = body + size + (size & 1)  // chunks are padded to even sizes
            if size < 0 || offset < body { break }
        }
        throw StenoError(.badAudio, "WAV file without a data chunk")
    }

    /// Reads a WAV file from disk.
    public init(path: String) throws(StenoError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StenoError(.badAudio, "cannot read \(path)")
        }
        try self.init(bytes: [UInt8](data))
    }

    /// The samples as interleaved 16-bit little-endian PCM (rounded, clipped to the range).
    public var s16leBytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(samples.count * 2)
        for sample in samples {
            let scaled = (PCMConverter.sanitize(sample) * 32768).rounded()
            let value = Int16(max(-32768, min(32767, scaled)))
            out.append(UInt8(truncatingIfNeeded: value))
            out.append(UInt8(truncatingIfNeeded: value >> 8))
        }
        return out
    }

    /// The samples as interleaved 32-bit float little-endian PCM.
    public var f32leBytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(samples.count * 4)
        for sample in samples {
            let bits = sample.bitPattern
            for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: bits >> shift)) }
        }
        return out
    }

    /// A complete 16-bit PCM WAV file.
    public var wavBytes: [UInt8] {
        let data = s16leBytes
        var out = [UInt8]()
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
        guard FileManager.default.createFile(atPath: path, contents: Data(wavBytes)) else {
            throw StenoError(.internal, "cannot write \(path)")
        }
    }
}
