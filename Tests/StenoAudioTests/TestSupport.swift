import COpus
import COpusShims
import Foundation
@testable import StenoAudio
import StenoCore
import Testing

/// libopus' encoder, for round trips (tests only; the server never encodes).
final class TestOpusEncoder {
    let rate: Int
    let channels: Int
    private let encoder: OpaquePointer

    init(rate: Int, channels: Int, application: Int32 = OPUS_APPLICATION_AUDIO, bitrate: Int32? = nil) throws {
        var error: Int32 = 0
        guard let encoder = opus_encoder_create(Int32(rate), Int32(channels), application, &error),
              error == OPUS_OK else { throw TestFailure("opus_encoder_create \(rate) Hz: \(error)") }
        self.encoder = encoder
        self.rate = rate
        self.channels = channels
        if let bitrate { _ = steno_opus_encoder_set_bitrate(encoder, bitrate) }
    }

    deinit { opus_encoder_destroy(encoder) }

    /// The encoder's look-ahead in samples at its rate.
    var lookahead: Int {
        var value: Int32 = 0
        _ = steno_opus_encoder_lookahead(encoder, &value)
        return Int(value)
    }

    /// Encodes interleaved samples into packets of `frameSize` samples per channel
    /// (the last partial frame is padded with zeros).
    func encode(_ interleaved: [Float], frameSize: Int) throws -> [[UInt8]] {
        var packets: [[UInt8]] = []
        var frame = [Float](repeating: 0, count: frameSize * channels)
        var buffer = [UInt8](repeating: 0, count: 4000)
        var start = 0
        while start < interleaved.count {
            let take = min(frame.count, interleaved.count - start)
            for i in 0..<frame.count { frame[i] = i < take ? interleaved[start + i] : 0 }
            let length = opus_encode_float(encoder, frame, Int32(frameSize), &buffer, Int32(buffer.count))
            guard length > 0 else { throw TestFailure("opus_encode_float: \(length)") }
            packets.append(Array(buffer[0..<Int(length)]))
            start += frame.count
        }
        return packets
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

enum Signal {
    /// A sine of `frequency` Hz, `seconds` long, at `rate`.
    static func sine(_ frequency: Double, rate: Int, seconds: Double, amplitude: Double = 0.5) -> [Float] {
        let count = Int((seconds * Double(rate)).rounded())
        return (0..<count).map { Float(amplitude * sin(2 * Double.pi * frequency * Double($0) / Double(rate))) }
    }

    /// Silence with a Hann-windowed tone burst centred at `center` seconds.
    static func burst(center: Double, width: Double = 0.03, frequency: Double = 1000,
                      rate: Int, seconds: Double) -> [Float] {
        let count = Int((seconds * Double(rate)).rounded())
        return (0..<count).map { i in
            let t = Double(i) / Double(rate)
            let x = (t - center) / width  // -0.5 ... 0.5 inside the burst
            guard abs(x) < 0.5 else { return 0 }
            let window = 0.5 + 0.5 * cos(2 * Double.pi * x)
            return Float(0.8 * window * sin(2 * Double.pi * frequency * (t - center)))
        }
    }

    /// Deterministic pseudo-random samples in -0.9...0.9.
    static func noise(count: Int, seed: UInt64 = 0x5EED) -> [Float] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Float(Int64(bitPattern: state) >> 11) / Float(1 << 52) * 0.9
        }
    }

    /// Energy centroid of `samples` in seconds at `rate`: where a burst sits.
    static func centroid(_ samples: [Float], rate: Int) -> Double {
        var weighted = 0.0, total = 0.0
        for (i, x) in samples.enumerated() {
            let e = Double(x) * Double(x)
            weighted += e * Double(i)
            total += e
        }
        return total > 0 ? weighted / total / Double(rate) : -1
    }

    static func energy(_ samples: ArraySlice<Float>) -> Double {
        samples.reduce(0) { $0 + Double($1) * Double($1) }
    }

    /// The fraction of the energy of `samples` at `frequency` (Goertzel power, normalised so
    /// that a pure sine gives ≈ 1).
    static func toneFraction(_ samples: ArraySlice<Float>, frequency: Double, rate: Int) -> Double {
        let omega = 2 * Double.pi * frequency / Double(rate)
        var re = 0.0, im = 0.0
        for (n, x) in samples.enumerated() {
            re += Double(x) * cos(omega * Double(n))
            im -= Double(x) * sin(omega * Double(n))
        }
        let total = energy(samples)
        guard total > 0 else { return 0 }
        return 2 * (re * re + im * im) / Double(samples.count) / total
    }

    /// Normalised correlation of two equally long sequences.
    static func correlation(_ a: ArraySlice<Float>, _ b: ArraySlice<Float>) -> Double {
        var ab = 0.0, aa = 0.0, bb = 0.0
        for (x, y) in zip(a, b) {
            ab += Double(x) * Double(y); aa += Double(x) * Double(x); bb += Double(y) * Double(y)
        }
        return aa > 0 && bb > 0 ? ab / (aa * bb).squareRoot() : 0
    }
}

enum Bytes {
    static func s16le(_ values: [Int16]) -> [UInt8] {
        values.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] }
    }

    static func f32le(_ values: [Float]) -> [UInt8] {
        values.flatMap { v in (0..<4).map { UInt8(truncatingIfNeeded: v.bitPattern >> (8 * $0)) } }
    }
}

enum Fixtures {
    /// A WAV file from the test bundle's Resources folder.
    static func wav(_ name: String) throws -> WAVFile {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: "wav", subdirectory: "Resources"))
        return try WAVFile(path: url.path)
    }
}

/// `bytes.withUnsafeBytes` for bodies with typed throws (withUnsafeBytes rethrows `any Error`).
func withBytes<T>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(StenoError) -> T) throws(StenoError) -> T {
    try bytes.withUnsafeBytes { raw in Result { () throws(StenoError) in try body(raw) } }.get()
}

/// Expects two sample arrays to be bit-identical, reporting the first difference (not both arrays).
func expectIdentical(_ a: [Float], _ b: [Float], _ what: String = "", sourceLocation: SourceLocation = #_sourceLocation) {
    guard a.count == b.count else {
        Issue.record("\(what): \(a.count) samples against \(b.count)", sourceLocation: sourceLocation)
        return
    }
    if let i = a.indices.first(where: { a[$0].bitPattern != b[$0].bitPattern }) {
        Issue.record("\(what): first difference at sample \(i) of \(a.count): \(a[i]) against \(b[i])",
                     sourceLocation: sourceLocation)
    }
}

/// What `AudioIngest` hands out for resampler output: every sample clamped to -1...1.
func clamped(_ samples: [Float]) -> [Float] { samples.map(PCMConverter.sanitize) }
