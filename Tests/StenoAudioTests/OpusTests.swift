import COpus
import Foundation
import StenoCore
import Testing
@testable import StenoAudio

@Suite struct OpusTests {
    static let rates = [8_000, 12_000, 16_000, 24_000, 48_000]
    /// Frame durations in units of 0.5 ms: 2.5, 5, 10, 20, 40, 60 ms.
    static let halfMilliseconds = [5, 10, 20, 40, 80, 120]

    /// Interleaved test signal: 440 Hz, amplitude 0.5 left and 0.3 right (mono: 0.5).
    static func sine(rate: Int, channels: Int, seconds: Double) -> [Float] {
        let left = Signal.sine(440, rate: rate, seconds: seconds, amplitude: 0.5)
        guard channels == 2 else { return left }
        let right = Signal.sine(440, rate: rate, seconds: seconds, amplitude: 0.3)
        return zip(left, right).flatMap { [$0, $1] }
    }

    @Test(arguments: rates, [1, 2])
    func roundTripEveryFrameSize(rate: Int, channels: Int) throws {
        for half in Self.halfMilliseconds {
            let frameSize = rate * half / 2000
            let encoder = try TestOpusEncoder(rate: rate, channels: channels, bitrate: Int32(channels * 48_000))
            let packets = try encoder.encode(Self.sine(rate: rate, channels: channels, seconds: 0.6), frameSize: frameSize)
            for outputRate in [16_000, 48_000] {
                let decoder = try OpusDecoder(outputRate: outputRate)
                let perPacket = outputRate * half / 2000
                var samples: [Float] = []
                for packet in packets {
                    #expect(OpusPacket.samples(packet) == 48 * half / 2)
                    let outcome = packet.withUnsafeBytes { decoder.decode($0, appendingTo: &samples) }
                    #expect(outcome == .init(sampleCount: perPacket, concealed: false, reason: nil))
                }
                #expect(samples.count == packets.count * perPacket)
                #expect(decoder.decodedPackets == packets.count && decoder.concealedPackets == 0)
                // The sine survives: after 100 ms of warm-up, the energy is that of the
                // (downmixed) input and nearly all of it is at 440 Hz.
                let steady = samples[(outputRate / 10)...]
                let meanSquare = Signal.energy(steady) / Double(steady.count)
                let expected = channels == 1 ? 0.125 : 0.08  // (0.5 or 0.4)² / 2
                #expect(abs(meanSquare / expected - 1) < 0.2, "\(rate) Hz ×\(channels), \(Double(half) / 2) ms → \(outputRate) Hz: mean square \(meanSquare)")
                let tone = Signal.toneFraction(steady, frequency: 440, rate: outputRate)
                #expect(tone > 0.95, "\(rate) Hz ×\(channels), \(Double(half) / 2) ms → \(outputRate) Hz: 440 Hz holds \(tone) of the energy")
            }
        }
    }

    /// Mono output of a stereo stream (what OpusDecoder uses) vs libopus' stereo output averaged:
    /// returns (SNR of the difference in dB, energy of mono / energy of average).
    static func monoVersusAveragedStereo(left: [Float], right: [Float], application: Int32,
                                         bitrate: Int32) throws -> (snr: Double, energyRatio: Double) {
        let encoder = try TestOpusEncoder(rate: 48_000, channels: 2, application: application, bitrate: bitrate)
        let packets = try encoder.encode(zip(left, right).flatMap { [$0, $1] }, frameSize: 960)
        let mono = try OpusDecoder(outputRate: 16_000)
        var error: Int32 = 0
        let stereo = try #require(opus_decoder_create(16_000, 2, &error))
        defer { opus_decoder_destroy(stereo) }
        var monoEnergy = 0.0, averageEnergy = 0.0, differenceEnergy = 0.0
        var pair = [Float](repeating: 0, count: 2 * 320)
        for packet in packets {
            let (samples, _) = mono.decode(packet)
            let count = opus_decode_float(stereo, packet, Int32(packet.count), &pair, 320, 0)
            #expect(Int(count) == samples.count)
            for i in 0..<samples.count {
                let average = Double(pair[2 * i] + pair[2 * i + 1]) / 2
                averageEnergy += average * average
                monoEnergy += Double(samples[i]) * Double(samples[i])
                differenceEnergy += (Double(samples[i]) - average) * (Double(samples[i]) - average)
            }
        }
        return (10 * log10(averageEnergy / max(differenceEnergy, 1e-30)), monoEnergy / averageEnergy)
    }

    @Test func monoOutputOfAStereoStreamIsTheAverageOfItsChannels() throws {
        // libopus folds stereo into mono itself. Where the codec codes the waveform (tones),
        // that is the average of its stereo output to the last bit that matters.
        for application in [OPUS_APPLICATION_VOIP, OPUS_APPLICATION_AUDIO] {
            let left = Signal.sine(300, rate: 48_000, seconds: 0.5, amplitude: 0.4)
            let right = Signal.sine(700, rate: 48_000, seconds: 0.5, amplitude: 0.2)
            let (snr, ratio) = try Self.monoVersusAveragedStereo(left: left, right: right,
                                                                 application: application, bitrate: 64_000)
            #expect(snr > 60, "application \(application): \(snr) dB")
            #expect(abs(ratio - 1) < 0.01)
        }
    }

    @Test func monoOutputOfANoisyStereoStreamHasTheSameLevel() throws {
        // Bands the codec fills with pseudo-random noise (not waveform-coded) come out as
        // different noise on the mono path: the waveforms differ there, the level does not.
        for bitrate: Int32 in [32_000, 64_000, 128_000] {
            let left = Signal.sine(300, rate: 48_000, seconds: 0.5, amplitude: 0.4)
            let right = Signal.noise(count: left.count).map { $0 * 0.2 }
            let (_, ratio) = try Self.monoVersusAveragedStereo(left: left, right: right,
                                                              application: OPUS_APPLICATION_AUDIO, bitrate: bitrate)
            #expect(abs(ratio - 1) < 0.15, "\(bitrate) bit/s: energy ratio \(ratio)")
        }
    }

    @Test func multiFramePacketOf120Milliseconds() throws {
        let encoder = try TestOpusEncoder(rate: 48_000, channels: 1)
        let frames = try encoder.encode(Signal.sine(440, rate: 48_000, seconds: 0.12), frameSize: 960)
        #expect(frames.count == 6)
        let repacketizer = try #require(opus_repacketizer_create())
        defer { opus_repacketizer_destroy(repacketizer) }
        for frame in frames { #expect(opus_repacketizer_cat(repacketizer, frame, Int32(frame.count)) == OPUS_OK) }
        var packet = [UInt8](repeating: 0, count: 8000)
        let length = opus_repacketizer_out(repacketizer, &packet, Int32(packet.count))
        #expect(length > 0)
        packet = Array(packet.prefix(Int(length)))
        #expect(OpusPacket.samples(packet) == 5760)
        #expect(OpusPacket.duration(packet) == 0.12)
        let (samples, outcome) = try OpusDecoder(outputRate: 16_000).decode(packet)
        #expect(samples.count == 1920 && !outcome.concealed)
    }

    /// StenoCore reads packet durations in pure Swift (the network thread counts received audio
    /// with it); the decoder conceals with the same figure. Both must agree with libopus' own
    /// reading for every header: every TOC byte with every frame-count byte, and alone.
    @Test func packetDurationsAgreeWithLibopusForEveryHeader() {
        func libopus(_ packet: [UInt8]) -> Int? {
            let n = opus_packet_get_nb_samples(packet, Int32(packet.count), 48_000)
            return n > 0 && n <= 5760 ? Int(n) : nil
        }
        var disagreements: [[UInt8]] = []
        for toc in 0...255 {
            let alone = [UInt8(toc)]
            if OpusPacket.samples(alone) != libopus(alone) { disagreements.append(alone) }
            for second in 0...255 {
                let packet = [UInt8(toc), UInt8(second), 0, 0]
                if OpusPacket.samples(packet) != libopus(packet) { disagreements.append(packet) }
            }
        }
        #expect(disagreements.isEmpty, "first: \(disagreements.prefix(5))")
        #expect(OpusPacket.samples([UInt8]()) == nil)
    }

    @Test func undecodablePacketsAreConcealedWithTheRightLengthAndCounted() throws {
        let encoder = try TestOpusEncoder(rate: 16_000, channels: 1, application: OPUS_APPLICATION_VOIP, bitrate: 32_000)
        let good = try encoder.encode(Signal.sine(440, rate: 16_000, seconds: 1.0), frameSize: 320)  // 20 ms
        let decoder = try OpusDecoder(outputRate: 16_000)
        var samples: [Float] = []
        func feed(_ packet: [UInt8]) -> OpusDecoder.Outcome {
            packet.withUnsafeBytes { decoder.decode($0, appendingTo: &samples) }
        }

        // Before any good packet: a readable TOC gives the packet's own length, else 20 ms.
        #expect(feed([2 << 3 | 1, 1, 2, 3]) == .init(sampleCount: 1280, concealed: true,
                                                     reason: "corrupted stream (-4)"))  // code 1 needs an even payload: 2 × 40 ms
        #expect(feed([]).sampleCount == 320)
        for packet in good.prefix(20) { #expect(!feed(packet).concealed) }
        let beforeDamage = samples.count

        let damaged: [(packet: [UInt8], samples: Int)] = [
            ([], 320),                            // empty: the last good packet's 20 ms
            ([0xFF, 0xFF, 1, 2, 3], 320),         // garbage, TOC says 1260 ms: unreadable → last good
            ([31 << 3 | 3, 0], 320),              // code 3 with zero frames → last good
            ([17 << 3 | 2, 250, 1], 160),         // code 2, first frame longer than the packet: 2 × 5 ms
            ([1 << 3 | 1, 9, 9, 9, 9, 9], 640),   // code 1 with an odd payload: 2 × 20 ms
            ([3 << 3 | 3, 0x02, 1, 2, 3], 1920),  // code 3, CBR, 2 × 60 ms, 3 bytes cannot split in 2
        ]
        for (packet, expected) in damaged {
            let outcome = feed(packet)
            #expect(outcome.concealed && outcome.sampleCount == expected, "\(packet): \(outcome)")
        }
        #expect(decoder.concealedPackets == damaged.count + 2)
        #expect(samples.count == beforeDamage + damaged.map(\.samples).reduce(0, +))

        // Decoding goes on as before: every later packet decodes, and the tone is back.
        let afterDamage = samples.count
        for packet in good.dropFirst(20) { #expect(feed(packet) == .init(sampleCount: 320, concealed: false, reason: nil)) }
        #expect(decoder.concealedPackets == damaged.count + 2)
        #expect(decoder.decodedPackets == good.count)
        let recovered = samples[(afterDamage + 1600)...]
        #expect(Signal.toneFraction(recovered, frequency: 440, rate: 16_000) > 0.9)
    }

    @Test func concealmentFollowsTheLastGoodPacketDuration() throws {
        let encoder = try TestOpusEncoder(rate: 48_000, channels: 1)
        let decoder = try OpusDecoder(outputRate: 8_000)
        for packet in try encoder.encode(Signal.sine(440, rate: 48_000, seconds: 0.12), frameSize: 2880) {
            #expect(decoder.decode(packet).outcome.sampleCount == 480)  // 60 ms at 8 kHz
        }
        #expect(decoder.lastGoodSamples48k == 2880)
        #expect(decoder.decode([]).outcome == .init(sampleCount: 480, concealed: true, reason: "empty packet"))
        decoder.reset()
        #expect(decoder.decode([]).outcome.sampleCount == 160)  // forgotten: 20 ms
    }

    @Test func unsupportedOutputRatesThrow() {
        for rate in [0, 11_025, 22_050, 44_100, 96_000, -16_000] {
            #expect(throws: StenoError.self) { try OpusDecoder(outputRate: rate) }
        }
    }
}

@Suite struct OpusEncoderTests {
    @Test(arguments: [8000, 16000, 48000])
    func framesOfTwentyMillisecondsDecodeBack(rate: Int) throws {
        let encoder = try OpusEncoder(sampleRate: rate)
        #expect(encoder.frameSamples == rate / 50)
        let tone = Signal.sine(440, rate: rate, seconds: 0.5)
        let decoder = try OpusDecoder(outputRate: 16_000)
        var decoded: [Float] = []
        var start = 0
        while start < tone.count {
            let packet = try encoder.encode(tone[start..<min(tone.count, start + encoder.frameSamples)])
            #expect(OpusPacket.duration(packet) == 0.02)
            let (samples, outcome) = decoder.decode(packet)
            #expect(!outcome.concealed)
            decoded += samples
            start += encoder.frameSamples
        }
        #expect(decoded.count == 25 * 320)
        // The tone comes through (after the codec's start-up): not silence.
        let energy = decoded[4000...].reduce(0) { $0 + $1 * $1 } / Float(decoded.count - 4000)
        #expect(energy > 0.05)
    }

    @Test func withDTXSilenceBecomesTinyPacketsThatStillLastTwentyMilliseconds() throws {
        let dtx = try OpusEncoder(sampleRate: 48000, discontinuousTransmission: true)
        let plain = try OpusEncoder(sampleRate: 48000)
        let silence = [Float](repeating: 0, count: 960)
        var dtxBytes = 0, plainBytes = 0
        for _ in 0..<50 {
            let a = try dtx.encode(silence[...]), b = try plain.encode(silence[...])
            #expect(OpusPacket.duration(a) == 0.02 && OpusPacket.duration(b) == 0.02)
            dtxBytes += a.count
            plainBytes += b.count
        }
        #expect(dtxBytes < plainBytes / 2, "\(dtxBytes) vs \(plainBytes)")
        // And decodes to the same length (the server's timeline counts it).
        let decoder = try OpusDecoder(outputRate: 16_000)
        #expect(decoder.decode(try dtx.encode(silence[...])).0.count == 320)
    }

    @Test func unsupportedSettingsAreErrors() {
        #expect(throws: StenoError.self) { _ = try OpusEncoder(sampleRate: 44100) }
        #expect(throws: StenoError.self) { _ = try OpusEncoder(sampleRate: 16000, frameMilliseconds: 25) }
    }
}
