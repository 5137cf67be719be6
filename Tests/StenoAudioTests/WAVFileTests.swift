import Foundation
import Testing
import StenoCore
@testable import StenoAudio

/// Builds WAV files in memory, chunk by chunk.
private struct WAVBuilder {
    var tag: UInt16 = 1
    var channels: UInt16 = 1
    var rate: UInt32 = 16000
    var bits: UInt16 = 16
    var extensible = false
    var extraChunks: [(String, [UInt8])] = []
    var dataSizeOverride: UInt32?

    func build(_ payload: [UInt8]) -> [UInt8] {
        var fmt: [UInt8] = []
        let blockAlign = channels * bits / 8
        fmt += le16(extensible ? 0xFFFE : tag) + le16(channels) + le32(rate)
        fmt += le32(rate * UInt32(blockAlign)) + le16(blockAlign) + le16(bits)
        if extensible {
            fmt += le16(22) + le16(bits) + le32(0) + le16(tag)
            fmt += [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71]
        }
        var body: [UInt8] = Array("WAVE".utf8)
        body += chunk("fmt ", fmt)
        for (id, bytes) in extraChunks { body += chunk(id, bytes) }
        body += Array("data".utf8) + le32(dataSizeOverride ?? UInt32(payload.count)) + payload
        return Array("RIFF".utf8) + le32(UInt32(body.count)) + body
    }

    private func chunk(_ id: String, _ bytes: [UInt8]) -> [UInt8] {
        Array(id.utf8) + le32(UInt32(bytes.count)) + bytes + (bytes.count % 2 == 1 ? [0] : [])
    }
}

private func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
private func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xFF) } }

private func floats(_ bytes: [UInt8]) -> [Float] {
    stride(from: 0, to: bytes.count, by: 4).map {
        Float(bitPattern: UInt32(bytes[$0]) | UInt32(bytes[$0 + 1]) << 8 | UInt32(bytes[$0 + 2]) << 16 | UInt32(bytes[$0 + 3]) << 24)
    }
}

@Suite struct WAVFileTests {
    @Test func sixteenBitKeepsItsBytes() throws {
        let payload: [UInt8] = [0x01, 0x00, 0xFF, 0x7F, 0x00, 0x80]
        let wav = try WAVFile(bytes: WAVBuilder().build(payload))
        #expect(wav.sampleRate == 16000 && wav.channels == 1)
        #expect(wav.samples == [1.0 / 32768, 32767.0 / 32768, -1])
        #expect(wav.s16leBytes == payload)
        #expect(wav.frameCount == 3)
        #expect(try wav.wireFormat() == AudioFormat(encoding: .pcmF32LE, sampleRate: 16000, channels: 1))
        #expect(abs(wav.duration - 3.0 / 16000) < 1e-12)
    }

    @Test func stereoAndOtherRatesAreKept() throws {
        let wav = try WAVFile(bytes: WAVBuilder(channels: 2, rate: 44100).build([UInt8](repeating: 0, count: 400)))
        #expect(wav.channels == 2)
        #expect(wav.sampleRate == 44100)
        #expect(wav.frameCount == 100)
    }

    @Test func eightTwentyFourAndThirtyTwoBitBecomeFloat() throws {
        let eight = try WAVFile(bytes: WAVBuilder(bits: 8).build([0, 128, 255]))
        #expect(eight.samples == [-1, 0, 127.0 / 128])
        #expect(floats(eight.f32leBytes) == eight.samples)

        // 24-bit little endian: -8388608 (min), 0, 4194304 (half)
        let twentyFour = try WAVFile(bytes: WAVBuilder(bits: 24).build([0x00, 0x00, 0x80, 0, 0, 0, 0x00, 0x00, 0x40]))
        #expect(twentyFour.samples == [-1, 0, 0.5])

        let thirtyTwo = try WAVFile(bytes: WAVBuilder(bits: 32).build(le32(0x4000_0000) + le32(0x8000_0000)))
        #expect(thirtyTwo.samples == [0.5, -1])
    }

    @Test func floatFilesAndExtensibleHeaders() throws {
        let f32 = try WAVFile(bytes: WAVBuilder(tag: 3, bits: 32).build(le32(Float(0.25).bitPattern)))
        #expect(f32.samples == [0.25])

        let d = Double(-0.5).bitPattern
        let f64 = try WAVFile(bytes: WAVBuilder(tag: 3, bits: 64).build(le32(UInt32(d & 0xFFFF_FFFF)) + le32(UInt32(d >> 32))))
        #expect(f64.samples == [-0.5])

        let ext = try WAVFile(bytes: WAVBuilder(rate: 48000, extensible: true).build([0x10, 0x00]))
        #expect(ext.samples == [16.0 / 32768])
        #expect(ext.sampleRate == 48000)
    }

    @Test func otherChunksAreSkippedWithTheirPadding() throws {
        let wav = try WAVFile(bytes: WAVBuilder(extraChunks: [("LIST", [1, 2, 3]), ("fact", [4, 0, 0, 0])]).build([7, 0]))
        #expect(wav.s16leBytes == [7, 0])
    }

    @Test func dataSizePlaceholdersReadToTheEndOfTheFile() throws {
        let streamed = try WAVFile(bytes: WAVBuilder(dataSizeOverride: 0xFFFF_FFFF).build([1, 0, 2, 0, 3]))
        #expect(streamed.s16leBytes == [1, 0, 2, 0])  // the half frame at the end is dropped
        let zero = try WAVFile(bytes: WAVBuilder(dataSizeOverride: 0).build([1, 0, 2, 0]))
        #expect(zero.frameCount == 2)
    }

    static let badFiles: [([UInt8], String)] = {
        let riff: [UInt8] = Array("RIFF".utf8)
        let wave: [UInt8] = Array("WAVE".utf8)
        let fmt: [UInt8] = Array("fmt ".utf8)
        let truncated: [UInt8] = riff + le32(100) + wave + fmt + le32(16) + [1, 0, 1]
        let noFmt: [UInt8] = riff + le32(4) + wave
        return [
            ([], "empty"),
            (Array("hello, this is not a wav file".utf8), "no RIFF/WAVE header"),
            (riff, "too short"),
            (truncated, "cut short"),
            (noFmt, "no fmt chunk"),
        ]
    }()

    @Test(arguments: badFiles)
    func badFilesSayWhatIsWrong(bytes: [UInt8], expected: String) {
        #expect {
            _ = try WAVFile(bytes: bytes)
        } throws: { error in
            guard let error = error as? StenoError else { return false }
            return error.code == .badAudio && error.message.contains(expected)
        }
    }

    @Test func missingDataChunk() {
        var bytes = WAVBuilder().build([])
        bytes.removeLast(8)  // drop the data chunk header
        #expect(throws: StenoError.self) { _ = try WAVFile(bytes: bytes) }
    }

    @Test func unsupportedFormatsAreUnsupportedAudio() {
        let cases: [WAVBuilder] = [
            WAVBuilder(channels: 3),
            WAVBuilder(rate: 96000),
            WAVBuilder(tag: 2, bits: 4),  // ADPCM
            WAVBuilder(tag: 3, bits: 16),
        ]
        for builder in cases {
            #expect {
                _ = try WAVFile(bytes: builder.build([0, 0, 0, 0, 0, 0]))
            } throws: { error in
                (error as? StenoError)?.code == .unsupportedAudio
            }
        }
    }

    @Test func writtenFilesReadBack() throws {
        let wav = WAVFile(sampleRate: 22050, channels: 2, samples: [0.5, -0.5, 0.75, -0.75, 0, 0.25])
        let back = try WAVFile(bytes: wav.wavBytes)
        #expect(back.sampleRate == 22050 && back.channels == 2)
        #expect(back.s16leBytes == wav.s16leBytes)
        #expect(back.mono == [0, 0, 0.125])
    }

    @Test func missingFileIsAnError() {
        #expect(throws: StenoError.self) { _ = try WAVFile(path: "/nonexistent/steno/file.wav") }
    }
}

@Suite struct WAVHeaderTests {
    @Test func aStreamedHeaderWaitsForItsBytes() throws {
        let file = WAVBuilder(channels: 2, rate: 22050, extraChunks: [("LIST", [1, 2, 3])], dataSizeOverride: 0xFFFF_FFFF)
            .build([1, 0, 2, 0, 3, 0, 4, 0])
        let dataOffset = file.count - 8
        for cut in 0..<dataOffset {
            #expect(try WAVHeader.parse(Array(file[0..<cut]), complete: false) == nil, "\(cut) bytes")
        }
        let header = try #require(try WAVHeader.parse(Array(file[0..<dataOffset]), complete: false))
        #expect(header.sampleRate == 22050 && header.channels == 2 && header.bitsPerSample == 16 && !header.isFloat)
        #expect(header.dataOffset == dataOffset && header.dataSize == nil && header.bytesPerFrame == 4)
        let samples = file.withUnsafeBytes { header.decode(UnsafeRawBufferPointer(rebasing: $0[dataOffset...])) }
        #expect(samples == [1, 2, 3, 4].map { Float($0) / 32768 })
    }

    @Test func aForeignStreamFailsAtOnce() {
        #expect(throws: StenoError.self) { _ = try WAVHeader.parse(Array("OggS".utf8), complete: false) }
        #expect(throws: StenoError.self) { _ = try WAVHeader.parse(Array("RIFF\u{0}\u{0}\u{0}\u{0}AVI ".utf8), complete: false) }
    }
}

/// Files decoded by FFmpeg's libraries (`MediaFile`), as uploads to the OpenAI-compatible route are.
@Suite struct MediaFileTests {
    @Test func aWAVFileIsDecodedToMonoAtTheRateAsked() throws {
        // One second of a 440 Hz tone in stereo at 22,050 Hz, as a WAV file's bytes.
        let tone = (0..<22_050).map { Float(sin(Double($0) * 2 * .pi * 440 / 22_050)) * 0.5 }
        let path = "/tmp/steno-mediafile-\(getpid()).wav"
        try WAVFile(sampleRate: 22_050, channels: 2, samples: tone.flatMap { [$0, $0] }).write(path: path)
        defer { unlink(path) }
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let samples = try MediaFile.decode(bytes, sampleRate: 16_000)
        #expect(abs(samples.count - 16_000) < 100)
        let peak = samples.dropFirst(1000).prefix(8000).map(abs).max() ?? 0
        #expect(abs(peak - 0.5) < 0.05)
        #expect(throws: MediaFile.Failure.tooLong) { try MediaFile.decode(bytes, sampleRate: 16_000, maxSeconds: 0.5) }
        #expect(throws: MediaFile.Failure.self) { try MediaFile.decode(Array("not audio at all".utf8), sampleRate: 16_000) }
    }
}
