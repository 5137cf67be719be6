import StenoCore
import Testing
@testable import StenoAudio

@Suite struct PCMTests {
    let s16Mono: PCMConverter
    let s16Stereo: PCMConverter
    let f32Mono: PCMConverter
    let f32Stereo: PCMConverter

    init() throws {
        s16Mono = try PCMConverter(encoding: .pcmS16LE, channels: 1)
        s16Stereo = try PCMConverter(encoding: .pcmS16LE, channels: 2)
        f32Mono = try PCMConverter(encoding: .pcmF32LE, channels: 1)
        f32Stereo = try PCMConverter(encoding: .pcmF32LE, channels: 2)
    }

    @Test func s16ExtremesMapIntoMinusOneToOne() throws {
        let out = try s16Mono.convert(Bytes.s16le([-32768, 32767, 0, 1, -1, 16384]))
        #expect(out == [-1, Float(32767) / 32768, 0, 1 / 32768, -1 / 32768, 0.5])
        #expect(out.allSatisfy { $0 >= -1 && $0 < 1 })
    }

    @Test func s16StereoIsAveraged() throws {
        let out = try s16Stereo.convert(Bytes.s16le([16384, -16384, 32767, 32767, -32768, -32768, 8192, 0]))
        #expect(out == [0, Float(32767) / 32768, -1, 0.125])
    }

    @Test func f32IsSanitized() throws {
        let input: [Float] = [.nan, .infinity, -.infinity, 2.5, -7, 0.25, -0.5, 1, -1,
                              -.nan, .signalingNaN, .greatestFiniteMagnitude, Float.leastNonzeroMagnitude]
        let out = try f32Mono.convert(Bytes.f32le(input))
        #expect(out == [0, 1, -1, 1, -1, 0.25, -0.5, 1, -1, 0, 0, 1, Float.leastNonzeroMagnitude])
    }

    @Test func f32StereoSanitizesEachChannelBeforeAveraging() throws {
        let input: [Float] = [.nan, 0.5, .infinity, -.infinity, 3, 0, 0.2, 0.4, .nan, .nan]
        let out = try f32Stereo.convert(Bytes.f32le(input))
        #expect(out == [0.25, 0, 0.5, (Float(0.2) + Float(0.4)) * 0.5, 0])
    }

    @Test(arguments: [(AudioEncoding.pcmS16LE, 1, 3), (.pcmS16LE, 1, 1), (.pcmS16LE, 2, 6), (.pcmS16LE, 2, 2),
                      (.pcmF32LE, 1, 5), (.pcmF32LE, 1, 2), (.pcmF32LE, 2, 12), (.pcmF32LE, 2, 4)])
    func misalignedMessagesAreRejectedWhole(encoding: AudioEncoding, channels: Int, byteCount: Int) throws {
        let converter = try PCMConverter(encoding: encoding, channels: channels)
        let bytes = [UInt8](repeating: 0x11, count: byteCount)
        let error = #expect(throws: StenoError.self) { try converter.convert(bytes) }
        #expect(error?.code == .badAudio)
        var output: [Float] = [0.5]
        let appendError = #expect(throws: StenoError.self) {
            try withBytes(bytes) { raw throws(StenoError) in try converter.append(raw, to: &output) }
        }
        #expect(appendError?.code == .badAudio)
        #expect(output == [0.5])  // nothing appended
    }

    @Test func emptyMessageGivesNoSamples() throws {
        #expect(try s16Stereo.convert([UInt8]()) == [])
        var output: [Float] = []
        #expect(try withBytes([]) { raw throws(StenoError) in try f32Mono.append(raw, to: &output) } == 0)
        #expect(output.isEmpty)
    }

    @Test func unalignedBytesAreRead() throws {
        // The message may start at any address: read from an odd offset.
        let values: [Float] = [0.1, -0.2, 0.3, -0.4]
        let padded = [0xAB] + Bytes.f32le(values)
        let out = try withBytes(padded) { raw throws(StenoError) in
            try f32Mono.convert(UnsafeRawBufferPointer(rebasing: raw[1...]))
        }
        #expect(out == values)
    }

    @Test func opusIsNotPCM() {
        #expect(throws: StenoError(.unsupportedAudio, "Opus packets are not PCM; use OpusDecoder")) {
            try PCMConverter(encoding: .opus, channels: 1)
        }
    }

    @Test func longBuffersMatchAPlainScalarReference() throws {
        // The kernels are vectorized; compare them with a per-sample reference on odd lengths.
        let noise = Signal.noise(count: 4099).map { $0 * 1.3 }  // some beyond ±1
        let outF = try f32Stereo.convert(Bytes.f32le(Array(noise.prefix(4098))))
        for i in 0..<2049 {
            let l = max(-1, min(1, noise[2 * i])), r = max(-1, min(1, noise[2 * i + 1]))
            #expect(outF[i] == (l + r) * 0.5)
        }
        let ints = noise.map { Int16(max(-32768, min(32767, ($0 * 32768).rounded()))) }
        let outS = try s16Mono.convert(Bytes.s16le(ints))
        #expect(outS == ints.map { Float($0) / 32768 })
    }

    @Test func appendKeepsWhatWasThere() throws {
        var output: [Float] = [9, 9]
        try withBytes(Bytes.s16le([16384, -16384])) { raw throws(StenoError) in _ = try s16Mono.append(raw, to: &output) }
        #expect(output == [9, 9, 0.5, -0.5])
    }
}
