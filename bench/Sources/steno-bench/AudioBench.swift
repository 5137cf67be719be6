// The audio ingest benchmark: CPU per second of audio for Opus decoding and PCM conversion +
// resampling through StenoAudio, each next to the bare libopus/soxr calls doing the same work
// (the floor), and the overhead ratio pipeline/floor.
//
//   steno-bench audio [--file WAV] [--seconds S] [--repeat N] [--opus-wavs DIR WAV...]
//
// --file     real speech to use (default Tests/StenoAudioTests/Resources/endgame_24k.wav,
//            relative to the current directory); looped to --seconds (default 30).
// --repeat   runs per measurement (default 15); the table shows the fastest run, which is
//            the most stable figure on a shared machine, and the median.
// --opus-wavs DIR WAV...  instead of timing: for each WAV and each Opus rate, encode
//            (libopus VOIP, 32 kbit/s, 20 ms) and write 16 kHz WAVs decoded both ways
//            (DIR/<name>-<rate>-direct.wav, DIR/<name>-<rate>-soxr.wav) for pocketsphinx,
//            plus DIR/<name>-8k-pcm.wav (8 kHz PCM through the ingest: narrowband, no Opus).

import COpus
import CSoxr
import COpusShims
import Foundation
import StenoAudio
import StenoCore

func runAudioBench(_ arguments: [String]) {
    var file = "Tests/StenoAudioTests/Resources/endgame_24k.wav"
    var seconds = 30.0
    var repeats = 15
    var opusWavDirectory: String?
    var opusWavInputs: [String] = []
    var index = 0
    while index < arguments.count {
        let argument = arguments[index]
        let value = index + 1 < arguments.count ? arguments[index + 1] : nil
        switch (argument, value) {
        case ("--file", let value?): file = value; index += 1
        case ("--seconds", let value?): seconds = Double(value) ?? seconds; index += 1
        case ("--repeat", let value?): repeats = max(1, Int(value) ?? repeats); index += 1
        case ("--opus-wavs", let value?):
            opusWavDirectory = value
            opusWavInputs = Array(arguments[(index + 2)...])
            index = arguments.count
        default:
            print("audio bench: unknown argument \(argument)")
            return
        }
        index += 1
    }

    do {
        if let opusWavDirectory {
            try writeOpusComparisonWAVs(directory: opusWavDirectory, inputs: opusWavInputs)
        } else {
            try AudioBench(file: file, seconds: seconds, repeats: repeats).run()
        }
    } catch {
        print("audio bench failed: \(error)")
    }
}

// MARK: - Timing

/// CPU time of this process (all threads), in seconds.
private func processCPUTime() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) * 1e-9
}

private struct Measurement {
    var runs: [Double] = []  // ms of CPU per second of audio
    var best: Double { runs.min() ?? .nan }
    var median: Double {
        let sorted = runs.sorted()
        return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
    }
}

private struct BenchFailure: Error, CustomStringConvertible {
    var description: String
}

// MARK: - Shared helpers

/// Resamples a whole signal with StenoAudio's resampler (set-up only, not timed).
private func resampleAll(_ samples: [Float], from rate: Int, to outputRate: Int) throws -> [Float] {
    let resampler = try Resampler(inputRate: rate, outputRate: outputRate)
    return resampler.process(samples) + resampler.flush()
}

/// Encodes mono samples with libopus into packets of `frameSize` samples.
private func encodeOpus(_ samples: [Float], rate: Int, frameSize: Int, bitrate: Int32 = 32_000) throws -> [[UInt8]] {
    var error: Int32 = 0
    guard let encoder = opus_encoder_create(Int32(rate), 1, OPUS_APPLICATION_VOIP, &error), error == OPUS_OK else {
        throw BenchFailure(description: "opus_encoder_create(\(rate)): \(error)")
    }
    defer { opus_encoder_destroy(encoder) }
    _ = steno_opus_encoder_set_bitrate(encoder, bitrate)
    var packets: [[UInt8]] = []
    var frame = [Float](repeating: 0, count: frameSize)
    var buffer = [UInt8](repeating: 0, count: 4000)
    var start = 0
    while start < samples.count {
        for i in 0..<frameSize { frame[i] = start + i < samples.count ? samples[start + i] : 0 }
        let length = opus_encode_float(encoder, frame, Int32(frameSize), &buffer, Int32(buffer.count))
        guard length > 0 else { throw BenchFailure(description: "opus_encode_float: \(length)") }
        packets.append(Array(buffer[0..<Int(length)]))
        start += frameSize
    }
    return packets
}

// MARK: - The timing tables

private struct AudioBench {
    let speech: [Float]  // mono, at speechRate
    let speechRate: Int
    let seconds: Double
    let repeats: Int
    let outputRate = 16_000

    init(file: String, seconds: Double, repeats: Int) throws {
        let wav = try WAVFile(path: file)
        guard wav.frameCount > 0 else { throw BenchFailure(description: "\(file) holds no audio") }
        let mono = wav.mono
        let wanted = Int(seconds * Double(wav.sampleRate))
        speech = (0..<wanted).map { mono[$0 % mono.count] }
        speechRate = wav.sampleRate
        self.seconds = Double(wanted) / Double(wav.sampleRate)
        self.repeats = repeats
        print("audio bench: \(file) (\(wav.sampleRate) Hz, \(String(format: "%.2f", wav.duration)) s) "
            + "looped to \(String(format: "%.1f", self.seconds)) s; \(repeats) runs each, CPU ms per audio second")
    }

    /// Runs `body` `repeats` times, interleaving with the other measurements of the row.
    func measure(_ bodies: [() -> Void]) -> [Measurement] {
        var results = [Measurement](repeating: Measurement(), count: bodies.count)
        for _ in 0..<repeats {
            for (i, body) in bodies.enumerated() {
                let start = processCPUTime()
                body()
                results[i].runs.append((processCPUTime() - start) * 1000 / seconds)
            }
        }
        return results
    }

    func run() throws {
        try runOpus()
        print("")
        try runPCM()
    }

    // (a) Opus: decode straight to 16 kHz, or at the declared rate then soxr.
    func runOpus() throws {
        print("")
        print("(a) Opus → 16 kHz mono, 20 ms packets (libopus VOIP 32 kbit/s), one packet per message")
        print("    ingest: AudioIngest, samples handed over in place; + array: appended to a reused [Float];")
        print("    floor: the same libopus/soxr calls on preallocated buffers. CPU ms per audio second, best of runs.")
        print(header)
        for rate in [8_000, 12_000, 16_000, 24_000, 48_000] {
            let packets = try encodeOpus(try resampleAll(speech, from: speechRate, to: rate), rate: rate, frameSize: rate / 50)
            let format = try AudioFormat(encoding: .opus, sampleRate: rate, channels: 1)
            for path in AudioIngest.OpusPath.allCases {
                let sink = Sink()
                let floor = { sink.total &+= opusFloor(packets, rate: rate, path: path) }
                let results = measure(pipelineRuns(packets, sink: sink) { try? AudioIngest(format: format, opusPath: path) } + [floor])
                print(row(["\(rate / 1000) kHz", path == .direct ? "direct 16k" : "\(rate / 1000)k + soxr"]
                    + cells(results)))
                if sink.total == 42 { print("") }
            }
        }
    }

    /// The same libopus (and soxr) calls as the pipeline, bare: preallocated buffers, no Swift
    /// arrays, no bookkeeping. Decoder creation is included in both, as in the pipeline.
    func opusFloor(_ packets: [[UInt8]], rate: Int, path: AudioIngest.OpusPath) -> Int {
        let decodeRate = path == .direct ? outputRate : rate
        var error: Int32 = 0
        guard let decoder = opus_decoder_create(Int32(decodeRate), 1, &error) else { return 0 }
        defer { opus_decoder_destroy(decoder) }
        let pcm = UnsafeMutablePointer<Float>.allocate(capacity: 5760)
        let out = UnsafeMutablePointer<Float>.allocate(capacity: 8192)
        defer { pcm.deallocate(); out.deallocate() }
        var soxr: soxr_t?
        if path == .resampled && rate != outputRate {
            var quality = soxr_quality_spec(UInt(SOXR_HQ), 0)
            var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
            var runtime = soxr_runtime_spec(1)
            soxr = soxr_create(Double(rate), Double(outputRate), 1, nil, &io, &quality, &runtime)
        }
        defer { if let soxr { soxr_delete(soxr) } }
        var total = 0
        for packet in packets {
            let n = packet.withUnsafeBufferPointer {
                opus_decode_float(decoder, $0.baseAddress, Int32($0.count), pcm, 5760, 0)
            }
            if let soxr {
                var used = 0, made = 0
                soxr_process(soxr, pcm, Int(n), &used, out, 8192, &made)
                total += made
            } else {
                total += Int(n)
            }
        }
        if let soxr {
            var made = 0
            repeat { soxr_process(soxr, nil, 0, nil, out, 8192, &made); total += made } while made > 0
        }
        return total
    }

    // (b) PCM s16le → float → soxr → 16 kHz.
    func runPCM() throws {
        print("(b) PCM → 16 kHz mono, 20 ms messages; floor: a bare conversion loop + the same soxr calls")
        print(header)
        let cases: [(Int, AudioEncoding, Int)] = [
            (8_000, .pcmS16LE, 1), (16_000, .pcmS16LE, 1), (22_050, .pcmS16LE, 1), (24_000, .pcmS16LE, 1),
            (44_100, .pcmS16LE, 1), (48_000, .pcmS16LE, 1), (48_000, .pcmF32LE, 2),
        ]
        for (rate, encoding, channels) in cases {
            let mono = try resampleAll(speech, from: speechRate, to: rate)
            let source = WAVFile(sampleRate: rate, channels: channels,
                                 samples: channels == 1 ? mono : mono.flatMap { [$0, $0 * 0.9] })
            let bytes = encoding == .pcmS16LE ? source.s16leBytes : source.f32leBytes
            let messageBytes = rate / 50 * channels * (encoding == .pcmS16LE ? 2 : 4)
            let messages = stride(from: 0, to: bytes.count, by: messageBytes).map {
                Array(bytes[$0..<min(bytes.count, $0 + messageBytes)])
            }
            let format = try AudioFormat(encoding: encoding, sampleRate: rate, channels: channels)
            let sink = Sink()
            let floor = { sink.total &+= pcmFloor(messages, rate: rate, encoding: encoding, channels: channels) }
            let results = measure(pipelineRuns(messages, sink: sink) { try? AudioIngest(format: format) } + [floor])
            let name = "\(encoding.rawValue)\(channels == 2 ? " stereo" : "")"
            print(row([String(format: "%g kHz", Double(rate) / 1000), name] + cells(results)))
            if sink.total == 42 { print("") }
        }
    }

    /// Bare conversion loop and soxr calls into preallocated buffers.
    func pcmFloor(_ messages: [[UInt8]], rate: Int, encoding: AudioEncoding, channels: Int) -> Int {
        let pcm = UnsafeMutablePointer<Float>.allocate(capacity: 8192)
        let out = UnsafeMutablePointer<Float>.allocate(capacity: 8192)
        defer { pcm.deallocate(); out.deallocate() }
        var soxr: soxr_t?
        if rate != outputRate {
            var quality = soxr_quality_spec(UInt(SOXR_HQ), 0)
            var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
            var runtime = soxr_runtime_spec(1)
            soxr = soxr_create(Double(rate), Double(outputRate), 1, nil, &io, &quality, &runtime)
        }
        defer { if let soxr { soxr_delete(soxr) } }
        var total = 0
        for message in messages {
            let frames = message.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                if encoding == .pcmS16LE {
                    let n = raw.count / 2
                    for i in 0..<n { pcm[i] = Float(base.loadUnaligned(fromByteOffset: 2 * i, as: Int16.self)) * (1 / 32768) }
                    return n
                }
                let n = raw.count / 8
                for i in 0..<n {
                    let l = base.loadUnaligned(fromByteOffset: 8 * i, as: Float.self)
                    let r = base.loadUnaligned(fromByteOffset: 8 * i + 4, as: Float.self)
                    pcm[i] = (min(max(l, -1), 1) + min(max(r, -1), 1)) * 0.5
                }
                return n
            }
            if let soxr {
                var used = 0, made = 0
                soxr_process(soxr, pcm, frames, &used, out, 8192, &made)
                total += made
            } else {
                total += frames
            }
        }
        if let soxr {
            var made = 0
            repeat { soxr_process(soxr, nil, 0, nil, out, 8192, &made); total += made } while made > 0
        }
        return total
    }

    var header: String {
        row(["input", "", "ingest", "(median)", "+ array", "floor", "(median)", "ingest/floor", "array/floor"])
    }

    /// ingest (zero-copy), + array, floor → table cells.
    func cells(_ results: [Measurement]) -> [String] {
        [ms(results[0].best), "(" + ms(results[0].median) + ")", ms(results[1].best),
         ms(results[2].best), "(" + ms(results[2].median) + ")",
         ratio(results[0].best, results[2].best), ratio(results[1].best, results[2].best)]
    }

    func row(_ cells: [String]) -> String {
        let widths = [9, 18, 7, 9, 8, 7, 9, 13, 12]
        return zip(cells, widths).map { cell, width in
            cell.count >= width ? cell : String(repeating: " ", count: width - cell.count) + cell
        }.joined(separator: " ")
    }

    func ms(_ value: Double) -> String { String(format: "%.3f", value) }
    func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? String(format: "%.2f×", a / b) : "—" }
}

/// `withUnsafeBytes` for a typed-throws body.
/// Adds up what the measured code produced, so that the optimizer cannot drop it.
private final class Sink { var total = 0 }

/// The pipeline over `messages`, twice: samples handed over in place, and appended to a
/// reused array. A fresh `AudioIngest` each run, as a session would make one.
private func pipelineRuns(_ messages: [[UInt8]], sink: Sink, make: @escaping () -> AudioIngest?) -> [() -> Void] {
    let zeroCopy = {
        guard let ingest = make() else { return }
        for message in messages {
            sink.total &+= (try? withMessage(message) { raw throws(StenoError) in
                try ingest.ingest(raw) { samples, _ in samples.count }
            }) ?? 0
        }
        sink.total &+= ingest.flush().count
    }
    let array = {
        guard let ingest = make() else { return }
        var output: [Float] = []
        output.reserveCapacity(4096)
        for message in messages {
            output.removeAll(keepingCapacity: true)
            _ = try? withMessage(message) { raw throws(StenoError) in try ingest.ingest(raw, appendingTo: &output) }
            sink.total &+= output.count
        }
        sink.total &+= ingest.flush().count
    }
    return [zeroCopy, array]
}

private func withMessage<T>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(StenoError) -> T) throws(StenoError) -> T {
    try bytes.withUnsafeBytes { raw in Result { () throws(StenoError) in try body(raw) } }.get()
}

// MARK: - Opus direct vs soxr: WAVs for pocketsphinx

private func writeOpusComparisonWAVs(directory: String, inputs: [String]) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    for input in inputs {
        let wav = try WAVFile(path: input)
        let name = URL(fileURLWithPath: input).deletingPathExtension().lastPathComponent
        for rate in [8_000, 12_000, 16_000, 24_000, 48_000] {
            let packets = try encodeOpus(try resampleAll(wav.mono, from: wav.sampleRate, to: rate), rate: rate,
                                         frameSize: rate / 50)
            let format = try AudioFormat(encoding: .opus, sampleRate: rate, channels: 1)
            // At 16 kHz both paths are the same code (the resampler is a copy): write one.
            for path in rate == 16_000 ? [.direct] : AudioIngest.OpusPath.allCases {
                let ingest = try AudioIngest(format: format, opusPath: path)
                var output: [Float] = []
                for packet in packets {
                    try withMessage(packet) { raw throws(StenoError) in _ = try ingest.ingest(raw, appendingTo: &output) }
                }
                ingest.flush(appendingTo: &output)
                let file = "\(directory)/\(name)-\(rate / 1000)k-\(path == .direct ? "direct" : "soxr").wav"
                try WAVFile(sampleRate: 16_000, channels: 1, samples: output).write(path: file)
            }
        }
        // A narrowband reference without Opus: the speech as 8 kHz PCM through the ingest.
        let narrow = WAVFile(sampleRate: 8_000, channels: 1, samples: try resampleAll(wav.mono, from: wav.sampleRate, to: 8_000))
        let ingest = try AudioIngest(format: try AudioFormat(encoding: .pcmS16LE, sampleRate: 8_000, channels: 1))
        let (samples, _) = try ingest.ingest(narrow.s16leBytes)
        try WAVFile(sampleRate: 16_000, channels: 1, samples: samples + ingest.flush())
            .write(path: "\(directory)/\(name)-8k-pcm.wav")
        print("wrote \(name): Opus at 8/12/16/24/48 kHz decoded direct and via soxr; 8 kHz PCM")
    }
}
