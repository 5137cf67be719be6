import StenoCore
import Testing
@testable import steno

/// Silence left out: the gate's verdicts on frames, silence frames in the send buffer, the
/// encoder's frames with suppression, the flag.
@Suite struct SilenceSuppressionUnitTests {
    /// `seconds` of low noise (the quiet of a room) or of a loud square wave, at 16 kHz.
    static func quiet(_ seconds: Double) -> [Float] {
        var state: UInt32 = 7
        return (0..<Int(seconds * 16000)).map { _ in
            state = state &* 1664525 &+ 1013904223
            return Float(Double(Int(state >> 16) % 2001 - 1000) / 1000 * 0.0005)
        }
    }
    static func loud(_ seconds: Double) -> [Float] { (0..<Int(seconds * 16000)).map { ($0 / 20) % 2 == 0 ? 0.3 : -0.3 } }

    @Test func theGateSendsFramesWithAudioWholeAndDeclaresRunsOfSilentOnesSoonAfterThePauseBegins() {
        let samples = Self.quiet(0.5) + Self.loud(1) + Self.quiet(8) + Self.loud(1) + Self.quiet(0.3)
        var gate = SilenceGate<Int>(sampleRate: 16000)
        var position = 0
        var sent = 0
        var silences: [(length: Int, releasedAt: Int)] = []
        func take(_ releases: [SilenceGate<Int>.Release], at: Int) {
            for release in releases {
                switch release {
                case .send(let index, let start, let length):
                    #expect(start == position && index * 320 == start)
                    position += length
                    sent += length
                case .silence(let start, let length):
                    #expect(start == position && length % 320 == 0)
                    position += length
                    silences.append((length, at))
                }
            }
        }
        var i = 0
        while i < samples.count {
            let frame = Array(samples[i..<min(samples.count, i + 320)])
            take(gate.push(frame, payload: i / 320), at: i)
            i += 320
        }
        take(gate.finish(), at: samples.count)
        #expect(position == samples.count)
        // Sent: 0.5 s + 1 s + 1.3 s, then the 0.5 s pre-roll + 1 s + 0.3 s (all on the 20 ms
        // grid here); the rest left out, declared 0.6 s after it stops being sent (at 2.8 s),
        // then 5 s of it, then the rest when speech resumes.
        #expect(sent == 73600, "\(sent)")
        #expect(silences.map(\.length) == [1600, 80000, 17600], "\(silences)")
        #expect(silences.first.map { $0.releasedAt < Int(3.5 * 16000) } == true, "\(silences)")
        #expect(silences.map(\.length).reduce(0, +) == samples.count - sent)
    }

    @Test func silenceFramesHoldNoAudioInTheBufferAndConsecutiveUnsentOnesAreOne() {
        var buffer = SendBuffer(limitSeconds: 0.1)
        func audio(_ start: Double) -> AudioFrame { AudioFrame(start: start, duration: 0.02, bytes: [1]) }
        func silence(_ start: Double, _ duration: Double) -> AudioFrame {
            AudioFrame(start: start, duration: duration, bytes: [], isSilence: true)
        }
        buffer.append(audio(0), live: true)
        buffer.append(silence(0.02, 5), live: true)
        buffer.append(silence(5.02, 5), live: true)  // merged
        buffer.append(audio(10.02), live: true)
        #expect(buffer.count == 3 && abs(buffer.unsentSeconds - 0.04) < 1e-9 && buffer.droppedSeconds == 0)
        #expect(buffer.takeUnsent() == audio(0))
        let merged = buffer.takeUnsent()
        #expect(merged?.isSilence == true && merged.map { abs($0.start - 0.02) < 1e-9 && abs($0.duration - 10) < 1e-9 } == true)
        #expect(abs(buffer.sentSeconds - 0.02) < 1e-9)
        _ = buffer.takeUnsent()  // the audio at 10.02
        buffer.append(silence(10.04, 1), live: true)
        #expect(buffer.takeUnsent() == silence(10.04, 1))
        buffer.append(silence(11.04, 1), live: true)  // not merged with one already sent
        #expect(buffer.takeUnsent() == silence(11.04, 1))
        // Over the limit, a live source drops its oldest unsent audio; silence frames among
        // it go too, and count for nothing.
        buffer.append(audio(12.04), live: true)
        buffer.append(silence(12.06, 1), live: true)
        for k in 0..<5 { buffer.append(audio(13.06 + Double(k) * 0.02), live: true) }
        #expect(abs(buffer.droppedSeconds - 0.02) < 1e-9 && buffer.nextUnsentStart == 12.06)
        buffer.append(audio(13.16), live: true)
        #expect(abs(buffer.droppedSeconds - 0.04) < 1e-9 && buffer.nextUnsentStart == 13.08)
        // A resume from inside what was sent: the audio after it and the silence go again, whole.
        buffer.rewind(after: 10.02)
        #expect(buffer.takeUnsent() == audio(10.02))
        #expect(buffer.takeUnsent() == silence(10.04, 1))
        // And the message says exactly how long.
        #expect(ClientMessages.silence(0.06) == #"{"type":"silence","duration":0.06}"#)
        #expect(ClientMessages.silence(441.0 / 22050 * 7) == #"{"type":"silence","duration":0.14}"#)
    }

    @Test func withSuppressionTheEncodersFramesKeepTheirGridAndPausesBecomeSilenceFrames() throws {
        let samples = Self.quiet(0.5) + Self.loud(1) + Self.quiet(4) + Self.loud(0.5)
        for encoding in [WireEncoding.opus, .pcm] {
            let encoder = try FrameEncoder(CapturedFormat(sampleRate: 16000, channels: 1, isSixteenBit: true), encoding: encoding,
                                           suppressingSilence: true)
            #expect(encoder.suppressesSilence)
            var frames: [AudioFrame] = []
            var i = 0
            while i < samples.count {
                frames += try encoder.add(Array(samples[i..<min(samples.count, i + 1000)]))
                i += 1000
            }
            frames += try encoder.finish()
            var end = 0.0
            for frame in frames {
                #expect(abs(frame.start - end) < 1e-9, "\(encoding): contiguous")
                end = frame.end
                if frame.isSilence {
                    #expect(frame.bytes.isEmpty)
                } else {
                    #expect(abs(frame.duration - 0.02) < 1e-9)
                    if encoding == .opus { #expect(OpusPacket.duration(frame.bytes) == 0.02) } else { #expect(frame.bytes.count == 640) }
                }
            }
            #expect(abs(end - 6) < 1e-9)
            let silent = frames.filter(\.isSilence).map(\.duration).reduce(0, +)
            #expect(abs(silent - 2.2) < 0.021, "\(encoding): \(silent)")
        }
    }

    @Test func liveInputLeavesSilenceOutUnlessTold() throws {
        func options(_ arguments: [String]) throws -> SendOptions { try #require(try SendOptions.parse(arguments, environment: [:])) }
        #expect(try options(["talk.wav"]).suppressesSilence)
        #expect(try options(["-"]).suppressesSilence)
        #expect(try options(["--device", "default"]).suppressesSilence)
        #expect(try !options(["talk.wav", "--fast"]).suppressesSilence)
        #expect(try !options(["-", "--no-silence-suppression"]).suppressesSilence)
        #expect(try !options(["--device", "default", "--no-silence-suppression"]).suppressesSilence)
        #expect(SendOptions.spec.helpText().contains("--no-silence-suppression"))
    }
}
