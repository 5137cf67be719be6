import StenoCore
import Testing
@testable import StenoAudio

/// Bad input must never crash: feed random bytes everywhere input arrives.
@Suite struct GarbageTests {
    /// Deterministic random messages of 0...maxLength bytes.
    static func messages(count: Int, maxLength: Int, seed: UInt64) -> [[UInt8]] {
        var state = seed
        func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 24
        }
        return (0..<count).map { _ in (0..<Int(next() % UInt64(maxLength + 1))).map { _ in UInt8(truncatingIfNeeded: next()) } }
    }

    @Test(arguments: [8_000, 16_000, 48_000])
    func randomOpusPacketsAreDecodedOrConcealedOnTime(rate: Int) throws {
        let ingest = try AudioIngest(format: AudioFormat(encoding: .opus, sampleRate: rate, channels: 2))
        var total = 0, output: [Float] = []
        for message in Self.messages(count: 400, maxLength: 300, seed: UInt64(rate)) {
            let (samples, report) = try ingest.ingest(message)
            #expect(samples.count == report.outputSamples && samples.count % 40 == 0)  // 2.5 ms steps
            #expect(samples.allSatisfy { $0.isFinite })
            total += report.inputSamples
            output += samples
        }
        #expect(ingest.clock.inputSamples == total)
        #expect(ingest.decodedPackets + ingest.concealedPackets == 400)
        #expect(ingest.concealedPackets > 0)
        #expect(output.count == ingest.clock.expectedOutputSamples)
    }

    @Test(arguments: [AudioEncoding.pcmS16LE, .pcmF32LE], [1, 2])
    func randomPCMGivesSamplesInRangeOrBadAudio(encoding: AudioEncoding, channels: Int) throws {
        let format = try AudioFormat(encoding: encoding, sampleRate: 44_100, channels: channels)
        let ingest = try AudioIngest(format: format)
        let frameBytes = format.bytesPerFrame ?? 1
        for message in Self.messages(count: 300, maxLength: 2000, seed: 7) {
            do throws(StenoError) {
                let (samples, _) = try ingest.ingest(message)
                #expect(message.count % frameBytes == 0)
                #expect(samples.allSatisfy { $0 >= -1 && $0 <= 1 })
            } catch {
                #expect(error.code == .badAudio && message.count % frameBytes != 0)
            }
        }
        let tail = ingest.flush()
        #expect(tail.allSatisfy { $0.isFinite })
        #expect(ingest.outputSamples == ingest.clock.expectedOutputSamples)
    }

    @Test func randomAndTruncatedWAVFilesThrowInsteadOfCrashing() throws {
        let good = WAVFile(sampleRate: 16_000, channels: 2, samples: Signal.noise(count: 200)).wavBytes
        #expect(try WAVFile(bytes: good).frameCount == 100)
        for length in 0..<good.count where length < 60 || length % 37 == 0 {
            _ = try? WAVFile(bytes: Array(good.prefix(length)))
        }
        for message in Self.messages(count: 200, maxLength: 100, seed: 3) {
            _ = try? WAVFile(bytes: Array("RIFF\0\0\0\0WAVE".utf8) + message)
        }
    }
}
