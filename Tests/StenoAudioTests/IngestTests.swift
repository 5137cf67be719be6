import COpus
import StenoCore
import Testing
@testable import StenoAudio

@Suite struct ClockTests {
    @Test func inputAndOutputSamplesMapToSessionSeconds() {
        var clock = AudioClock(inputRate: 44_100, outputRate: 16_000)
        clock.recordInput(44_100 * 3)
        clock.recordOutput(47_000)
        #expect(clock.receivedSeconds == 3)
        #expect(clock.seconds(atInputSample: 22_050) == 0.5)
        #expect(clock.seconds(atOutputSample: 8_000) == 0.5)
        #expect(clock.seconds(atFrame: 123) == 1.23)
        #expect(clock.frameSamples == 160)
        #expect(clock.outputSample(atSeconds: 1.23) == 19_680)
        #expect(clock.expectedOutputSamples == 48_000)
        #expect(clock.producedSeconds == 47_000.0 / 16_000)
    }

    @Test func segmentsAfterAFlushKeepTheTimelineExact() {
        var clock = AudioClock(inputRate: 44_100, outputRate: 16_000)
        clock.recordInput(1001)  // 1001 × 160/441 = 363.18 → 363 samples after flush
        clock.recordOutput(363)
        clock.endSegment()
        clock.endSegment()  // a second flush with nothing new changes nothing
        #expect(clock.segments.count == 2)
        // Output sample 363 is the first of the new stream: input sample 1001, not 363/16000 s.
        #expect(clock.seconds(atOutputSample: 363) == 1001.0 / 44_100)
        #expect(clock.seconds(atOutputSample: 362) == 362.0 / 16_000)
        #expect(clock.seconds(atOutputSample: 363 + 16_000) == 1001.0 / 44_100 + 1)
        #expect(clock.outputSample(atSeconds: 1001.0 / 44_100 + 1) == 363 + 16_000)
        #expect(clock.outputSample(atSeconds: 0.01) == 160)
        clock.recordInput(441)
        #expect(clock.expectedOutputSamples == 363 + 160)
    }

    @Test func anyTimeOrFrameIsAnswered() {
        // Times may come from clients (`finalize` through T): nothing may trap.
        let clock = AudioClock(inputRate: 48_000, outputRate: 16_000)
        #expect(clock.outputSample(atSeconds: .nan) == 0)
        #expect(clock.outputSample(atSeconds: .infinity) == 1 << 50)
        #expect(clock.outputSample(atSeconds: -.infinity) == -(1 << 50))
        #expect(clock.outputSample(atSeconds: 1e300) == 1 << 50)
        #expect(clock.seconds(atFrame: .max) > 0)
        #expect(clock.seconds(atOutputSample: .min) < 0)
    }
}

@Suite struct IngestTests {
    static let pcmRates = [8_000, 16_000, 22_050, 24_000, 44_100, 48_000]

    /// Feeds `bytes` in messages of `messageBytes` and flushes; returns the output.
    static func run(_ ingest: AudioIngest, _ bytes: [UInt8], messageBytes: Int) throws -> [Float] {
        var output: [Float] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + messageBytes)
            let message = Array(bytes[start..<end])
            let report = try withBytes(message) { raw throws(StenoError) in try ingest.ingest(raw, appendingTo: &output) }
            #expect(report.concealment == nil)
            start = end
        }
        ingest.flush(appendingTo: &output)
        return output
    }

    @Test(arguments: pcmRates, [AudioEncoding.pcmS16LE, .pcmF32LE])
    func pcmBurstLandsAtItsTimeThroughTheIngest(rate: Int, encoding: AudioEncoding) throws {
        let center = 1.2345
        let mono = Signal.burst(center: center, rate: rate, seconds: 2)
        let stereo = WAVFile(sampleRate: rate, channels: 2, samples: mono.flatMap { [$0, $0] })
        let bytes = encoding == .pcmS16LE ? stereo.s16leBytes : stereo.f32leBytes
        let format = try AudioFormat(encoding: encoding, sampleRate: rate, channels: 2)
        let ingest = try AudioIngest(format: format)
        // 20 ms messages, as a browser client would send them.
        let output = try Self.run(ingest, bytes, messageBytes: (format.bytesPerFrame ?? 1) * rate / 50)
        let found = ingest.clock.seconds(atOutputSample: 0) + Signal.centroid(output, rate: 16_000)
        #expect(abs(found - center) <= 0.002, "\(encoding.rawValue) \(rate) Hz: \(found) s")
        #expect(ingest.inputSeconds == 2)
        #expect(output.count == ingest.outputSamples)
        #expect(output.count == ingest.clock.expectedOutputSamples)
        #expect(output.count == 32_000)
    }

    @Test func misalignedPCMIsRejectedAndTheClockDoesNotMove() throws {
        let ingest = try AudioIngest(format: AudioFormat(encoding: .pcmS16LE, sampleRate: 22_050, channels: 2))
        var output: [Float] = []
        _ = try ingest.ingest([UInt8](repeating: 0, count: 400))
        let before = (ingest.clock, ingest.outputSamples)
        for bad in [1, 2, 3, 401, 402] {
            #expect(throws: StenoError.self) { try ingest.ingest([UInt8](repeating: 1, count: bad)) }
            let error = #expect(throws: StenoError.self) {
                try withBytes([UInt8](repeating: 1, count: bad)) { raw throws(StenoError) in
                    try ingest.ingest(raw, appendingTo: &output)
                }
            }
            #expect(error?.code == .badAudio)
        }
        #expect(output.isEmpty)
        #expect(ingest.clock == before.0 && ingest.outputSamples == before.1)
        #expect(ingest.clock.inputSamples == 100)
    }

    @Test(arguments: [AudioIngest.OpusPath.direct, .resampled])
    func opusPacketsAdvanceTheClockByTheirDuration(path: AudioIngest.OpusPath) throws {
        for rate in AudioFormat.opusRates.sorted() {
            let encoder = try TestOpusEncoder(rate: rate, channels: 1)
            let packets = try encoder.encode(Signal.sine(440, rate: rate, seconds: 1), frameSize: rate / 400)  // 2.5 ms
            let ingest = try AudioIngest(format: AudioFormat(encoding: .opus, sampleRate: rate, channels: 1), opusPath: path)
            var output: [Float] = []
            for packet in packets {
                let report = try withBytes(packet) { raw throws(StenoError) in try ingest.ingest(raw, appendingTo: &output) }
                #expect(report.inputSamples == rate / 400)
            }
            // A damaged packet: concealed (2 × 60 ms from its TOC), reported, counted, on time.
            let (concealed, report) = try ingest.ingest([3 << 3 | 3, 0x02, 1, 2, 3])
            output += concealed
            #expect(report.inputSamples == rate * 12 / 100)
            #expect(report.concealment?.code == .badAudio)
            #expect(ingest.concealedPackets == 1 && ingest.decodedPackets == 400)
            ingest.flush(appendingTo: &output)
            #expect(ingest.inputSeconds == 1.12)
            #expect(output.count == 17_920)
            #expect(output.count == ingest.outputSamples && output.count == ingest.clock.expectedOutputSamples)
        }
    }

    @Test func flushInTheMiddleThenMoreAudioStaysOnTime() throws {
        // finalize → flush; later audio is a new resampler stream, and the clock's segments
        // put its samples at the right times.
        let rate = 44_100
        let format = try AudioFormat(encoding: .pcmF32LE, sampleRate: rate, channels: 1)
        let ingest = try AudioIngest(format: format)
        var output: [Float] = []
        let first = Signal.noise(count: 30_001).map { $0 * 0.01 }
        let second = Signal.burst(center: 0.4321, rate: rate, seconds: 1)
        for part in [first, second] {
            try withBytes(Bytes.f32le(part)) { raw throws(StenoError) in _ = try ingest.ingest(raw, appendingTo: &output) }
            ingest.flush(appendingTo: &output)
        }
        let split = Resampler.expectedOutputCount(forInput: 30_001, inputRate: rate, outputRate: 16_000)
        #expect(ingest.clock.segments.map(\.outputStart) == [0, split, output.count])
        #expect(output.count == ingest.clock.expectedOutputSamples)
        let found = ingest.clock.seconds(atOutputSample: split)
            + Signal.centroid(Array(output[split...]), rate: 16_000)
        #expect(abs(found - (30_001.0 / Double(rate) + 0.4321)) <= 0.002)
    }

    @Test(arguments: [8_000, 16_000, 44_100])
    func largeMessagesAndTheInPlaceAPIGiveTheSameSamples(rate: Int) throws {
        // 64 KiB messages (the server's default frame limit) grow the ingest's own buffer;
        // the in-place API hands over exactly what the array API appends.
        let samples = Signal.noise(count: 3 * 32_768 + 5)
        let bytes = WAVFile(sampleRate: rate, channels: 1, samples: samples).s16leBytes
        let format = try AudioFormat(encoding: .pcmS16LE, sampleRate: rate, channels: 1)
        let viaArray = try Self.run(try AudioIngest(format: format), bytes, messageBytes: 65_536)
        let ingest = try AudioIngest(format: format)
        var inPlace: [Float] = []
        var reported = 0
        for start in stride(from: 0, to: bytes.count, by: 65_536) {
            reported += try withBytes(Array(bytes[start..<min(bytes.count, start + 65_536)])) { raw throws(StenoError) in
                try ingest.ingest(raw) { buffer, report in
                    inPlace += buffer
                    return report.outputSamples
                }
            }
        }
        #expect(reported == inPlace.count)
        inPlace += ingest.flush()
        expectIdentical(inPlace, viaArray, "in place vs array")
        #expect(viaArray.allSatisfy { $0 >= -1 && $0 <= 1 })
        let resampler = try Resampler(inputRate: rate, outputRate: 16_000)
        let pcm = try PCMConverter(encoding: .pcmS16LE, channels: 1).convert(bytes)
        expectIdentical(viaArray, clamped(resampler.process(pcm) + resampler.flush()), "ingest vs one-shot")
    }

    @Test func unsupportedOutputRatesThrow() throws {
        let opus = try AudioFormat(encoding: .opus, sampleRate: 48_000, channels: 2)
        #expect(throws: StenoError.self) { try AudioIngest(format: opus, outputRate: 22_050) }
        #expect(throws: Never.self) { try AudioIngest(format: opus, outputRate: 22_050, opusPath: .resampled) }
        let pcm = try AudioFormat(encoding: .pcmS16LE, sampleRate: 8_000, channels: 1)
        #expect(throws: StenoError.self) { try AudioIngest(format: pcm, outputRate: 4_000) }
    }
}

@Suite struct RealSpeechTests {
    @Test func speechThroughPCMIngest() throws {
        let wav = try Fixtures.wav("endgame_24k")
        #expect(wav.sampleRate == 24_000 && wav.channels == 1 && wav.frameCount == 86_400)
        let ingest = try AudioIngest(format: AudioFormat(encoding: .pcmS16LE, sampleRate: 24_000, channels: 1))
        let output = try IngestTests.run(ingest, wav.s16leBytes, messageBytes: 960)  // 20 ms
        #expect(output.count == 57_600 && output.count == ingest.clock.expectedOutputSamples)
        #expect(ingest.inputSeconds == 3.6)
        // Chunked ingest equals one-shot resampling of the same samples, bit for bit.
        let resampler = try Resampler(inputRate: 24_000, outputRate: 16_000)
        let oneShot = resampler.process(wav.samples) + resampler.flush()
        #expect(oneShot.contains { abs($0) > 1 })  // loud speech overshoots ±1 after resampling…
        expectIdentical(output, clamped(oneShot), "chunked ingest vs one-shot")  // …and the ingest clamps it
    }

    @Test(arguments: [AudioIngest.OpusPath.direct, .resampled], [1, 2])
    func speechThroughOpusEncodeAndDecode(path: AudioIngest.OpusPath, channels: Int) throws {
        let wav = try Fixtures.wav("endgame_24k")
        let encoder = try TestOpusEncoder(rate: 24_000, channels: channels, application: OPUS_APPLICATION_VOIP,
                                          bitrate: Int32(32_000 * channels))
        let interleaved = channels == 1 ? wav.samples : wav.samples.flatMap { [$0, $0 * 0.5] }
        let packets = try encoder.encode(interleaved, frameSize: 480)  // 20 ms
        #expect(packets.count == 180)
        let ingest = try AudioIngest(format: AudioFormat(encoding: .opus, sampleRate: 24_000, channels: channels),
                                     opusPath: path)
        var output: [Float] = []
        for packet in packets {
            let (samples, report) = try ingest.ingest(packet)
            #expect(report.concealment == nil)
            output += samples
        }
        ingest.flush(appendingTo: &output)
        #expect(ingest.concealedPackets == 0)
        #expect(ingest.inputSeconds == 3.6)
        #expect(output.count == 57_600 && output.count == ingest.clock.expectedOutputSamples)

        // The speech is still there: compare with the original resampled to 16 kHz, shifted by
        // the encoder's look-ahead (6.5 ms). Opus is not waveform-exact; it must be close.
        let resampler = try Resampler(inputRate: 24_000, outputRate: 16_000)
        let gain: Float = channels == 1 ? 1 : 0.75
        let reference = (resampler.process(wav.samples) + resampler.flush()).map { $0 * gain }
        let lag = encoder.lookahead * 16_000 / 24_000
        let correlation = Signal.correlation(output[lag...], reference[..<(reference.count - lag)])
        #expect(correlation > 0.7, "\(path) ×\(channels): correlation \(correlation)")
    }
}
