import StenoAudio
import StenoCore
import StenoSession
import StenoSpeech
import Testing

/// Where the pipeline says the recognizer's next block is complete (`nextBlockAt`) is a time the
/// machine can reach exactly: the end of the chunk that completes it, counted in whole samples
/// as the machine counts them, with no slack between the two counts.
@Suite struct NextBlockTests {
    /// Feeds `chunks` (each `units` samples at `unitRate`, as the machine counts them) and checks,
    /// before each, that once the input reaches the time the pipeline named the block is complete.
    /// Returns how many chunks ended exactly on a named time.
    private func check(_ format: AudioFormat, unitRate: Int, chunks: [(bytes: [UInt8], units: Int)]) throws -> Int {
        let engine = TapeEngine()
        let recognizer = try engine.makeRecognizer(options: RecognizerOptions()) {}
        let pipeline = try TranscriptionPipeline(format: format, recognizer: recognizer)
        var units = 0
        var exact = 0
        for chunk in chunks {
            let at = try #require(pipeline.nextBlockAt)
            let block = (engine.tape.samples / 2048 + 1) * 2048
            _ = try pipeline.append(chunk.bytes)
            units += chunk.units
            let end = Double(units) / Double(unitRate)
            if end >= at {
                #expect(engine.tape.samples >= block, "the input reached \(at) s and the block is not complete")
            }
            if end == at { exact += 1 }
        }
        return exact
    }

    private static func pcm(_ frames: Int) -> [UInt8] { [UInt8](repeating: 0, count: frames * 2) }

    @Test func atTheRecognizersRateABlockEndsExactlyOnAChunk() throws {
        // 8 ms chunks at 16 kHz: every 16th ends where a 2048-sample block does.
        let format = try AudioFormat(encoding: .pcmS16LE, sampleRate: 16_000, channels: 1)
        let exact = try check(format, unitRate: 16_000, chunks: Array(repeating: (Self.pcm(128), 128), count: 80))
        #expect(exact == 5)
    }

    @Test func resampledInputCompletesTheBlockByTheTimeNamed() throws {
        for rate in [44_100, 48_000, 22_050, 8_000] {
            let format = try AudioFormat(encoding: .pcmS16LE, sampleRate: rate, channels: 1)
            let frames = rate / 100
            _ = try check(format, unitRate: rate, chunks: Array(repeating: (Self.pcm(frames), frames), count: 150))
        }
    }

    @Test func opusCountedAt48kHzMeetsTheDeclaredRatesSamples() throws {
        // The machine counts Opus in 48 kHz units whatever the declared rate; the pipeline in the
        // declared rate's samples (Opus decoded straight at 16 kHz: no resampler delay).
        let encoder = try OpusEncoder(sampleRate: 16_000, frameMilliseconds: 20)
        var chunks: [(bytes: [UInt8], units: Int)] = []
        for _ in 0..<100 { chunks.append((try encoder.encode(ArraySlice(repeating: 0, count: 320)), 960)) }
        let format = try AudioFormat(encoding: .opus, sampleRate: 16_000, channels: 1)
        let exact = try check(format, unitRate: 48_000, chunks: chunks)
        // 20 ms packets and 128 ms blocks meet every 640 ms: 3 times in 2 s.
        #expect(exact == 3)
    }
}
