import Foundation
import StenoAudio
import StenoCore
import StenoTestSupport
import Testing

/// `steno send` leaving silence out (`silence` messages instead of quiet audio), against the
/// real server: the finals are the whole file's, and far fewer bytes go over the network.
@Suite struct SilenceSendTests {
    /// Two finals' worth of the clip (its first 3.2 s, whole utterances), a pause of `pause` s
    /// of a quiet room (low noise), the same again, `tail` s of quiet, as a WAV file.
    static func withPauses(pause: Double, tail: Double, name: String) -> String {
        do throws(StenoError) {
            let whole = try WAVFile(path: TestAudio.clip)
            let clip = WAVFile(sampleRate: whole.sampleRate, channels: 1, samples: Array(whole.samples.prefix(whole.sampleRate * 16 / 5)))
            var state: UInt32 = 99
            func quiet(_ seconds: Double) -> [Float] {
                (0..<Int(seconds * Double(clip.sampleRate))).map { _ in
                    state = state &* 1664525 &+ 1013904223
                    return Float(Double(Int(state >> 16) % 2001 - 1000) / 1000 * 0.0005)
                }
            }
            let samples = clip.samples + quiet(pause) + clip.samples + quiet(tail)
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("steno-\(name)-\(getpid()).wav").path
            try WAVFile(sampleRate: clip.sampleRate, channels: 1, samples: samples).write(path: path)
            return path
        } catch {
            fatalError("cannot make the test file: \(error.message)")
        }
    }

    /// 3.2 s of speech, 10 s of quiet, 3.2 s of speech, 3 s of quiet.
    static let longPauses = withPauses(pause: 10, tail: 3, name: "pauses")

    /// Sends `path` on standard input (as fast as the server takes it) through a proxy that
    /// counts the bytes: the result and the bytes sent.
    static func send(_ path: String, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String, bytes: Int) {
        let proxy = try TCPProxy(targetPort: CLIServer.shared.port)
        defer { proxy.stop() }
        let result = try StenoCommand.run(["send", "-", "--server", "ws://127.0.0.1:\(proxy.port)", "--log-level", "debug"] + arguments,
                                          input: try Data(contentsOf: URL(fileURLWithPath: path)))
        return (result.status, result.stdout, result.stderr, proxy.bytesFromClients)
    }

    @Test func aFileWithLongPausesGivesTranscribesFinalsWithFarFewerBytes() throws {
        let expected = try TestAudio.transcribed(Self.longPauses)
        #expect(TestAudio.ranges(ofText: expected).count >= 4)
        let suppressed = try Self.send(Self.longPauses, ["--encoding", "pcm"])
        #expect(suppressed.status == 0, "\(suppressed.stderr)")
        #expect(suppressed.stderr.contains("leaving silence out") && suppressed.stderr.contains("s of silence"))
        #expect(suppressed.stdout == expected)
        let whole = try Self.send(Self.longPauses, ["--encoding", "pcm", "--no-silence-suppression"])
        #expect(whole.status == 0, "\(whole.stderr)")
        #expect(!whole.stderr.contains("s of silence"))
        #expect(whole.stdout == expected)
        // Of the 19.4 s, what is left out is most of the 10 s pause and of the 3 s at the end
        // (all but 1.3 s after speech, and the 0.5 s sent again before it resumes).
        print("steno send --encoding pcm: \(whole.bytes) bytes whole, \(suppressed.bytes) with silence left out")
        #expect(Double(suppressed.bytes) < 0.7 * Double(whole.bytes), "\(suppressed.bytes) of \(whole.bytes)")
    }

    @Test func opusWithSilenceLeftOutGivesTheFinalsOfOpusSentWhole() throws {
        let suppressed = try Self.send(Self.longPauses, [])
        #expect(suppressed.status == 0, "\(suppressed.stderr)")
        let whole = try Self.send(Self.longPauses, ["--no-silence-suppression"])
        #expect(whole.status == 0, "\(whole.stderr)")
        // Opus is lossy, and what the decoder hears after a pause differs: the same words, at
        // times within one 10 ms frame.
        let a = TestAudio.ranges(ofText: whole.stdout), b = TestAudio.ranges(ofText: suppressed.stdout)
        #expect(a.count >= 4 && a.count == b.count, "\(whole.stdout)\n\(suppressed.stdout)")
        for (x, y) in zip(a, b) { #expect(abs(x.0 - y.0) <= 0.0101 && abs(x.1 - y.1) <= 0.0101, "\(a) \(b)") }
        func words(_ text: String) -> [String] { text.split(separator: "\n").map { String($0.split(separator: "] ", maxSplits: 1).last ?? "") } }
        #expect(words(whole.stdout) == words(suppressed.stdout))
        print("steno send (Opus): \(whole.bytes) bytes whole, \(suppressed.bytes) with silence left out")
        #expect(suppressed.bytes < whole.bytes, "\(suppressed.bytes) of \(whole.bytes)")
    }

    @Test func aConnectionDroppedInAPauseIsResumedAndTheFinalsAreTheWholeFilesStill() throws {
        // At real time, so that the cut comes in the pause, after some of it was declared.
        let file = Self.withPauses(pause: 5, tail: 1, name: "pause-resume")
        let proxy = try TCPProxy(targetPort: CLIServer.shared.port)
        defer { proxy.stop() }
        let send = try StenoCommand(["send", file, "--server", "ws://127.0.0.1:\(proxy.port)", "--encoding", "pcm",
                                     "--retry-max", "0.5", "--log-level", "debug"])
        try send.waitForStderr("s of silence at ")
        proxy.cut()
        #expect(try send.finish() == 0, "\(send.stderr.text)")
        #expect(send.stderr.text.contains("resumed session"), "\(send.stderr.text)")
        #expect(proxy.acceptedCount >= 2)
        #expect(send.stdout.text == (try TestAudio.transcribed(file)), "\(send.stderr.text)\n\(send.stdout.text)")
    }
}
