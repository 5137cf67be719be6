import Testing
@testable import StenoCore

@Suite struct OpusPacketTests {
    /// RFC 6716 Table 2, frame size in tenths of a millisecond for configs 0...31.
    static let frameTenthsOfMs: [Int] = [
        100, 200, 400, 600,  100, 200, 400, 600,  100, 200, 400, 600,  // SILK NB, MB, WB
        100, 200, 100, 200,                                            // Hybrid SWB, FB
        25, 50, 100, 200,  25, 50, 100, 200,  25, 50, 100, 200,  25, 50, 100, 200,  // CELT NB, WB, SWB, FB
    ]

    static func toc(config: Int, stereo: Bool = false, code: Int) -> UInt8 {
        UInt8(config << 3 | (stereo ? 4 : 0) | code)
    }

    static func samples(tenths: Int) -> Int { tenths * 48 / 10 }

    @Test(arguments: 0..<32)
    func codeZeroIsOneFrame(config: Int) {
        let expected = Self.samples(tenths: Self.frameTenthsOfMs[config])
        #expect(OpusPacket.frameSamples(config: config) == expected)
        for stereo in [false, true] {
            #expect(OpusPacket.samples([Self.toc(config: config, stereo: stereo, code: 0), 0xAA, 0xBB]) == expected)
        }
        // A TOC alone is a valid (empty-frame, DTX) packet.
        #expect(OpusPacket.samples([Self.toc(config: config, code: 0)]) == expected)
    }

    @Test(arguments: 0..<32)
    func codesOneAndTwoAreTwoFrames(config: Int) {
        let expected = 2 * Self.samples(tenths: Self.frameTenthsOfMs[config])
        #expect(OpusPacket.samples([Self.toc(config: config, code: 1), 1, 2]) == expected)
        #expect(OpusPacket.samples([Self.toc(config: config, code: 2), 1, 1, 2]) == expected)
        #expect(OpusPacket.frameCount([Self.toc(config: config, code: 1)]) == 2)
    }

    @Test(arguments: 0..<32)
    func codeThreeCountsFramesUpTo120ms(config: Int) {
        let perFrame = Self.samples(tenths: Self.frameTenthsOfMs[config])
        for count in 0...63 {
            for flags: UInt8 in [0x00, 0x80, 0x40, 0xC0] {  // VBR and padding bits do not change the count
                let packet: [UInt8] = [Self.toc(config: config, code: 3), flags | UInt8(count), 0, 0]
                let total = perFrame * count
                let expected: Int? = (count == 0 || total > 5760) ? nil : total
                #expect(OpusPacket.samples(packet) == expected, "config \(config) count \(count)")
            }
        }
    }

    @Test func malformedHeaders() {
        #expect(OpusPacket.samples([UInt8]()) == nil)                     // empty
        #expect(OpusPacket.samples([Self.toc(config: 19, code: 3)]) == nil)  // code 3 without its count byte
        #expect(OpusPacket.samples([Self.toc(config: 19, code: 3), 0]) == nil)  // 0 frames
        #expect(OpusPacket.samples([Self.toc(config: 3, code: 1)]) == 5760)     // 2 × 60 ms = 120 ms: allowed
        #expect(OpusPacket.samples([Self.toc(config: 3, code: 3), 3]) == nil)   // 3 × 60 ms
        #expect(OpusPacket.samples([Self.toc(config: 16, code: 3), 48]) == 5760)  // 48 × 2.5 ms
        #expect(OpusPacket.samples([Self.toc(config: 16, code: 3), 49]) == nil)
    }

    @Test func durationInSeconds() {
        #expect(OpusPacket.duration([Self.toc(config: 19, code: 0)]) == 0.02)
        #expect(OpusPacket.duration([Self.toc(config: 16, code: 0)]) == 0.0025)
        #expect(OpusPacket.duration(ArraySlice([0xFF, 0x01, 0x02]).dropFirst()) == 0.02)  // config 0, code 1: 2 × 10 ms
        #expect(OpusPacket.frameSamples(config: 32) == nil)
        #expect(OpusPacket.frameSamples(config: -1) == nil)
    }
}
