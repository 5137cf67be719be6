import COpus
import COpusShims
import Foundation
import StenoAudio
import StenoCore

// End-to-end test support: the test speech, the inputs made from it, `start` messages.

/// The test speech (copied into Resources/ from the project's other test resources) and
/// the wire forms made from it.
enum Speech {
    /// Samuel Beckett, 16 kHz mono, 9.97 s: "ever try it | as the files | no matter |
    /// try again fail again | fail that ah" (what pocketsphinx hears).
    static let beckett16k: [Float] = load("beckett.wav", rate: 16000)
    /// A line from Endgame, 24 kHz mono, 3.6 s.
    static let endgame24k: [Float] = load("endgame_24k.wav", rate: 24000)

    static func load(_ name: String, rate: Int) -> [Float] {
        guard let url = Bundle.module.url(forResource: "Resources/\(name)", withExtension: nil) else {
            fatalError("missing test resource \(name)")
        }
        do throws(StenoError) {
            let wav = try WAVFile(path: url.path)
            precondition(wav.sampleRate == rate && wav.channels == 1, "\(name): \(wav.sampleRate) Hz, \(wav.channels) channels")
            return wav.samples
        } catch {
            fatalError("\(name): \(error.message)")
        }
    }

    /// `samples` at another rate, through StenoAudio's soxr resampler.
    static func resample(_ samples: [Float], from input: Int, to output: Int) -> [Float] {
        do throws(StenoError) {
            let resampler = try Resampler(inputRate: input, outputRate: output)
            return resampler.process(samples) + resampler.flush()
        } catch {
            fatalError("resampler \(input) → \(output): \(error.message)")
        }
    }

    /// 16-bit little-endian PCM (mono).
    static func s16le(_ samples: [Float]) -> [UInt8] {
        WAVFile(sampleRate: 16000, channels: 1, samples: samples).s16leBytes
    }

    /// `bytes` cut into messages of `size` bytes (the last may be shorter).
    static func split(_ bytes: [UInt8], every size: Int) -> [[UInt8]] {
        stride(from: 0, to: bytes.count, by: size).map { Array(bytes[$0..<min($0 + size, bytes.count)]) }
    }

    /// PCM s16le messages of `milliseconds` of audio at `rate`.
    static func pcmMessages(_ samples: [Float], rate: Int, milliseconds: Int = 100) -> [[UInt8]] {
        split(s16le(samples), every: 2 * max(1, rate * milliseconds / 1000))
    }

    /// Opus packets of 20 ms (one per message) from 48 kHz mono samples, made by libopus.
    static func opusPackets(_ samples48k: [Float], bitrate: Int32 = 32000) -> [[UInt8]] {
        var error: Int32 = 0
        guard let encoder = opus_encoder_create(48000, 1, OPUS_APPLICATION_VOIP, &error), error == OPUS_OK else {
            fatalError("opus_encoder_create: \(error)")
        }
        defer { opus_encoder_destroy(encoder) }
        _ = steno_opus_encoder_set_bitrate(encoder, bitrate)
        let frameSize = 960
        var packets: [[UInt8]] = []
        var frame = [Float](repeating: 0, count: frameSize)
        var buffer = [UInt8](repeating: 0, count: 4000)
        var start = 0
        while start < samples48k.count {
            let take = min(frameSize, samples48k.count - start)
            for i in 0..<frameSize { frame[i] = i < take ? samples48k[start + i] : 0 }
            let length = opus_encode_float(encoder, frame, Int32(frameSize), &buffer, Int32(buffer.count))
            precondition(length > 0, "opus_encode_float: \(length)")
            packets.append(Array(buffer[0..<Int(length)]))
            start += frameSize
        }
        return packets
    }

    /// Beckett as s16le at 16 kHz in 100 ms messages.
    static let beckettMessages = pcmMessages(beckett16k, rate: 16000)
}

/// Audio to send: the `start` format, the messages, and how long it is.
struct TestInput: Sendable {
    var name: String
    var format: AudioFormat
    var messages: [[UInt8]]

    /// Seconds on the session timeline: PCM frames / rate, dropping messages that are not
    /// whole frames; for Opus each packet's duration from its header (a packet without a
    /// readable header counts as long as the last good one, as the server counts it).
    var duration: Double {
        switch format.encoding {
        case .opus:
            var samples = 0
            var last = 960
            for packet in messages {
                if let n = OpusPacket.samples(packet) { last = n }
                samples += last
            }
            return Double(samples) / Double(OpusPacket.sampleRate)
        default:
            let frame = format.bytesPerFrame ?? 2
            let bytes = messages.reduce(0) { $0 + ($1.count % frame == 0 ? $1.count : 0) }
            return Double(bytes / frame) / Double(format.sampleRate)
        }
    }

    /// Messages up to `seconds` of audio (whole messages), and the rest.
    func split(at seconds: Double) -> (before: [[UInt8]], after: [[UInt8]], at: Double) {
        var t = 0.0
        var index = 0
        while index < messages.count && t < seconds - 1e-9 {
            t += messageDuration(messages[index])
            index += 1
        }
        return (Array(messages[..<index]), Array(messages[index...]), t)
    }

    func messageDuration(_ message: [UInt8]) -> Double {
        if format.encoding == .opus { return 0.02 }
        return Double(message.count / (format.bytesPerFrame ?? 2)) / Double(format.sampleRate)
    }

    var startMessage: String { StartMessage.text(format) }

    static func pcm16k(_ name: String = "beckett", _ samples: [Float] = Speech.beckett16k) -> TestInput {
        TestInput(name: name, format: AudioFormat.pcm(16000), messages: Speech.pcmMessages(samples, rate: 16000))
    }
}

extension AudioFormat {
    static func pcm(_ rate: Int, encoding: AudioEncoding = .pcmS16LE, channels: Int = 1) -> AudioFormat {
        do throws(StenoError) {
            return try AudioFormat(encoding: encoding, sampleRate: rate, channels: channels)
        } catch {
            fatalError(error.message)
        }
    }
}

enum StartMessage {
    /// A `start` message for `format`; `extra` is more members, e.g. `"channel":"a"`.
    static func text(_ format: AudioFormat, extra: String = "") -> String {
        var text = #"{"type":"start","audio":{"encoding":"\#(format.encoding.rawValue)","#
        text += #""sampleRate":\#(format.sampleRate),"channels":\#(format.channels)},"language":"en-US""#
        if !extra.isEmpty { text += "," + extra }
        return text + "}"
    }
}
