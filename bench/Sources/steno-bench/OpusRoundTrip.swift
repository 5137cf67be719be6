import StenoAudio
import StenoCore

/// `steno-bench opus IN.wav OUT.wav [--bitrate N] [--no-dtx] [--audio]`: what the server hears of a 16 kHz
/// mono WAV that `steno send` sends as Opus (20 ms packets, 32 kbit/s, DTX, as its FrameEncoder
/// makes them; decoded at 16 kHz, as the server's ingest does), written as a WAV. bench/noise.py's
/// batch floor for the Opus rows is Whisper's transcription of this: the same decoded audio.
/// Another bitrate, no DTX or libopus' general audio application: what a client's choice would change.
func runOpusRoundTrip(_ arguments: [String]) {
    var files: [String] = []
    var bitrate = 32_000
    var dtx = true
    var voice = true
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        switch argument {
        case "--bitrate": bitrate = rest.popFirst().flatMap { Int($0) } ?? 0
        case "--no-dtx": dtx = false
        case "--audio": voice = false
        default: files.append(argument)
        }
    }
    guard files.count == 2, bitrate >= 6_000 else {
        print("usage: steno-bench opus IN.wav OUT.wav [--bitrate 6000…510000] [--no-dtx] [--audio]")
        return
    }
    do throws(StenoError) {
        let input = try WAVFile(path: files[0])
        guard input.sampleRate == 16_000, input.channels == 1 else {
            throw StenoError(.unsupportedAudio, "\(files[0]) is not 16 kHz mono")
        }
        let encoder = try OpusEncoder(sampleRate: 16_000, bitrate: bitrate, discontinuousTransmission: dtx, voice: voice)
        let decoder = try OpusDecoder(outputRate: 16_000)
        var heard: [Float] = []
        heard.reserveCapacity(input.samples.count + encoder.frameSamples)
        var at = 0
        while at < input.samples.count {
            let end = min(input.samples.count, at + encoder.frameSamples)
            let packet = try encoder.encode(input.samples[at..<end])
            packet.withUnsafeBytes { _ = decoder.decode($0, appendingTo: &heard) }
            at = end
        }
        try WAVFile(sampleRate: 16_000, channels: 1, samples: Array(heard.prefix(input.samples.count))).write(path: files[1])
    } catch {
        print("steno-bench opus: \(error.message)")
    }
}
