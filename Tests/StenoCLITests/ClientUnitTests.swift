import StenoCore
import StenoTransport
import Testing
@testable import steno

/// The clients' parts that need no server: buffering, timelines, the start/resume choice,
/// retries, de-duplication, framing, output. Their command lines are in
/// ClientCommandLineTests.swift, leaving silence out in SilenceSuppressionUnitTests.swift.
@Suite struct SendBufferTests {
    static func frame(_ index: Int, _ duration: Double = 0.02) -> AudioFrame {
        AudioFrame(start: Double(index) * duration, duration: duration, bytes: [UInt8(truncatingIfNeeded: index)])
    }

    @Test func framesGoOutInOrderAndSentOnesAreHeldUntilForgotten() {
        var buffer = SendBuffer(limitSeconds: 1)
        for i in 0..<10 { buffer.append(Self.frame(i), live: false) }
        #expect(abs(buffer.unsentSeconds - 0.2) < 1e-9)
        for i in 0..<6 { #expect(buffer.takeUnsent() == Self.frame(i)) }
        #expect(abs(buffer.sentSeconds - 0.12) < 1e-9 && buffer.count == 10)
        buffer.forget(through: 0.06)  // frames 0-2 end by 0.06
        #expect(buffer.firstStart == 0.06 && buffer.count == 7)
        // A resumed server has 0.1 s: frames 5 … are sent again, 3 and 4 are forgotten.
        let r1 = buffer.rewind(after: 0.1)
        #expect(r1 == 0.1)
        let r2 = buffer.takeUnsent()
        #expect(r2 == Self.frame(5))
        #expect(abs(buffer.unsentSeconds - 0.08) < 1e-9)
    }

    @Test func aSourceThatCanWaitIsHeldBackAndALiveOneLosesItsOldestAudio() {
        var waiting = SendBuffer(limitSeconds: 0.1)
        for i in 0..<5 { waiting.append(Self.frame(i), live: false) }
        #expect(!waiting.hasRoom)
        _ = waiting.takeUnsent()
        #expect(waiting.hasRoom)

        var live = SendBuffer(limitSeconds: 0.1)
        var dropped = 0.0
        for i in 0..<8 { dropped += live.append(Self.frame(i), live: true) }
        #expect(abs(dropped - 0.06) < 1e-9 && abs(live.droppedSeconds - 0.06) < 1e-9)
        #expect(live.nextUnsentStart == Self.frame(3).start)  // the newest 0.1 s are kept
    }

    @Test func sentAudioIsHeldUpToTheLimitOnceTheServerHasIt() {
        var buffer = SendBuffer(limitSeconds: 0.1)
        for i in 0..<20 {
            buffer.append(Self.frame(i), live: false)
            _ = buffer.takeUnsent()
            buffer.acknowledge(through: Self.frame(i).end)  // the server's progress.received
        }
        #expect(buffer.sentSeconds <= 0.1 + SendBuffer.tolerance)
        #expect(buffer.firstStart == Self.frame(15).start)
        #expect(buffer.unacknowledgedSeconds == 0)
    }

    /// What is in flight (sent, not yet acknowledged by the server's `progress.received`) is
    /// kept past the limit, so that a resume can send it again, and bounded by holding the
    /// sender back: a server that stops reading does not make the sockets swallow minutes of
    /// audio that a dropped connection would lose (`steno send --fast` lost 691 s so).
    @Test func audioInFlightIsKeptForAResumeAndBoundsTheSending() {
        var buffer = SendBuffer(limitSeconds: 2)
        #expect(buffer.inFlightLimit == 5)
        for i in 0..<500 { buffer.append(Self.frame(i), live: false) }  // 10 s
        var sent = 0
        while buffer.maySend, buffer.takeUnsent() != nil { sent += 1 }
        #expect(sent == 250, "5 s in flight, then the sender waits")
        #expect(abs(buffer.sentSeconds - 5) < 1e-6 && buffer.firstStart == 0, "all of it kept, past the 2 s limit")
        #expect(abs(buffer.unacknowledgedSeconds - 5) < 1e-6)
        // The server has 3 s: 2 s more may go, and what it has is forgotten beyond the limit.
        buffer.acknowledge(through: 3)
        #expect(abs(buffer.unacknowledgedSeconds - 2) < 1e-6 && buffer.maySend)
        #expect(buffer.firstStart == Self.frame(150).start, "acknowledged audio is held up to the limit only")
        while buffer.maySend, buffer.takeUnsent() != nil { sent += 1 }
        #expect(sent == 400)
        // The connection drops; the resumed session has 3 s: everything after it goes again.
        let from = buffer.rewind(after: 3)
        #expect(from == Self.frame(150).start)
        #expect(buffer.unacknowledgedSeconds == 0 && abs(buffer.unsentSeconds - 7) < 1e-6)
        #expect(buffer.takeUnsent() == Self.frame(150))
        // A final forgets what it covers, in flight or not.
        buffer.forget(through: 3.02)
        #expect(buffer.unacknowledgedSeconds == 0 && buffer.sentSeconds == 0)
    }

    @Test func aTimelineMapsSessionTimesAndBridgesHoles() {
        var timeline = SessionTimeline(startingAt: 5)
        timeline.sent(AudioFrame(start: 5, duration: 1, bytes: []), gapSent: false)
        #expect(timeline.sender(0.5) == 5.5)
        // Two seconds were lost: without gap messages the mapping moves on …
        let late = AudioFrame(start: 8, duration: 1, bytes: [])
        #expect(timeline.hole(before: late) == 2)
        var spliced = timeline
        spliced.sent(late, gapSent: false)
        #expect(spliced.sessionPosition == 2 && spliced.sender(1.5) == 8.5 && spliced.sender(0.5) == 5.5)
        // … with them the session's timeline advances too.
        var gapped = timeline
        gapped.sent(late, gapSent: true)
        #expect(gapped.sessionPosition == 4 && gapped.sender(3.5) == 8.5)
        // Resuming where the server got to.
        gapped.resumed(received: 3.5)
        #expect(gapped.senderPosition == 8.5 && gapped.sessionPosition == 3.5)
    }
}

@Suite struct SessionChoiceTests {
    static let ready = ServerMessage(#"{"type":"ready","seq":1,"session":"s1","startedAt":"2026-11-29T19:07:13.211Z","limits":{"resumeSeconds":30},"resumeToken":"tok"}"#)!

    @Test func resumeWhileTheServerHoldsTheSessionElseStart() throws {
        var record = try #require(SessionRecord(ready: Self.ready))
        #expect(record.id == "s1" && record.resumeToken == "tok" && record.resumeSeconds == 30 && record.takesGaps)
        #expect(SessionRecord.opening(for: nil, now: 0) == .start)
        record.lastSeq = 41
        record.lostAt = 100
        #expect(SessionRecord.opening(for: record, now: 110) == .resume(session: "s1", token: "tok", after: 41))
        #expect(SessionRecord.opening(for: record, now: 131) == .start)
        record.resumeToken = nil
        #expect(SessionRecord.opening(for: record, now: 101) == .start)
        // A server without resume says nothing of it.
        let old = try #require(SessionRecord(ready: ServerMessage(#"{"type":"ready","seq":1,"session":"s2","limits":{}}"#)!))
        #expect(old.resumeToken == nil && !old.takesGaps && SessionRecord.opening(for: old, now: 0) == .start)
    }

    @Test func clientMessages() throws {
        let start = ClientMessage.startText(try AudioFormat(encoding: .opus, sampleRate: 16000, channels: 1), language: "en-US", channel: "c")
        #expect(start == #"{"type":"start","audio":{"encoding":"opus","sampleRate":16000,"channels":1},"language":"en-US","volatile":true,"words":true,"channel":"c"}"#)
        #expect(throws: Never.self) { _ = try ClientMessage.parse(start) }
        let raw = ClientMessage.startText(try AudioFormat(encoding: .pcmS16LE, sampleRate: 16000, channels: 1), format: .raw)
        #expect(raw.hasSuffix(#""words":true,"format":"raw"}"#))
        #expect(try ClientMessage.parse(raw) == .start(StartRequest(audio: AudioFormat(encoding: .pcmS16LE, sampleRate: 16000, channels: 1), format: .raw)))
        let named = ClientMessage.startText(try AudioFormat(encoding: .pcmS16LE, sampleRate: 16000, channels: 1),
                                            phrases: ["John Dashwood", "Steno \"server\""], boost: 2.5)
        #expect(named.hasSuffix(#""words":true,"phrases":["John Dashwood","Steno \"server\""],"boost":2.5}"#), "\(named)")
        guard case .start(let request) = try ClientMessage.parse(named) else {
            Issue.record("not a start: \(named)")
            return
        }
        #expect(request.vocabulary?.phrases == [["John", "Dashwood"], ["Steno", "server"]] && request.vocabulary?.boost == 2.5)
        #expect(ClientMessages.resume(session: "s", token: "t", after: 7) == #"{"type":"resume","session":"s","resumeToken":"t","after":7}"#)
        #expect(ClientMessages.gap(1.25) == #"{"type":"gap","duration":1.25}"#)
    }

    @Test func retriesBackOffAndGiveUpButABusyServerIsWaitedOut() {
        var retry = Reconnection(maxDelay: 4, giveUpAfter: 10)
        let r3 = retry.failed(at: 0, jitter: 0.5)
        #expect(r3 == 0.5)
        let r4 = retry.failed(at: 1, jitter: 0.5)
        #expect(r4 == 1)
        let r5 = retry.failed(at: 2, jitter: 0.5)
        #expect(r5 == 2)
        let r6 = retry.failed(at: 4, jitter: 0.5)
        #expect(r6 == 4)
        let r7 = retry.failed(at: 8, jitter: 1)
        #expect(r7 == 4)  // capped
        let r8 = retry.failed(at: 10, jitter: 0.5)
        #expect(r8 == nil)  // ten seconds of failures
        retry.succeeded()
        let r9 = retry.failed(at: 20, jitter: 0)
        #expect(r9 == 0.4)
        let r10 = retry.busy(retryAfter: 7)
        #expect(r10 == 4 && retry.failingSince == nil)
        let r11 = retry.verdict(for: .refused(status: 401, retryAfter: nil), at: 0, jitter: 0)
        #expect(r11
            == .stop(code: ExitCode.refused, message: "the server refused the connection: 401 Unauthorized (a missing or wrong --token)"))
        guard case .retry(let delay, _) = retry.verdict(for: .refused(status: 503, retryAfter: 2), at: 0, jitter: 0) else {
            Issue.record("503 is waited out")
            return
        }
        #expect(delay == 2)
    }

    @Test func aChannelsFinalsArePrintedOncePerTimeline() {
        var follower = ChannelFollower()
        let r12 = follower.joined(startedAt: "A")
        #expect(r12)
        let r13 = follower.isNew(TimeRange(start: 0, end: 1))
        #expect(r13)
        let r14 = follower.isNew(TimeRange(start: 1.5, end: 2))
        #expect(r14)
        // A reconnect: joined again, backfill again.
        let r15 = follower.joined(startedAt: "A")
        #expect(!r15)
        let r16 = follower.isNew(TimeRange(start: 0, end: 1))
        #expect(!r16)
        let r17 = follower.isNew(TimeRange(start: 1.5, end: 2))
        #expect(!r17)
        let r18 = follower.isNew(TimeRange(start: 2.5, end: 3))
        #expect(r18)
        // The next publisher's timeline starts at 0 again.
        let r19 = follower.joined(startedAt: "B")
        #expect(r19)
        let r20 = follower.isNew(TimeRange(start: 0, end: 1))
        #expect(r20)
    }
}

@Suite struct FramingAndOutputTests {
    @Test func pcmFramesAreTwentyMillisecondsOnTheSendersTimeline() throws {
        let encoder = try FrameEncoder(CapturedFormat(sampleRate: 44100, channels: 2, isSixteenBit: true), encoding: .pcm)
        #expect(encoder.format == (try AudioFormat(encoding: .pcmS16LE, sampleRate: 44100, channels: 2)))
        var frames = try encoder.add([Float](repeating: 0.25, count: 2 * 1000))
        frames += try encoder.finish()
        #expect(frames.map(\.bytes.count) == [882 * 4, 118 * 4])
        #expect(frames[1].start == 882.0 / 44100 && frames[1].end == 1000.0 / 44100)
        #expect(Array(frames[0].bytes[0..<2]) == [0x00, 0x20])  // 0.25 × 32768 = 0x2000
        let float = try FrameEncoder(CapturedFormat(sampleRate: 16000, channels: 1, isSixteenBit: false), encoding: .pcm)
        #expect(float.format.encoding == .pcmF32LE)
    }

    @Test func opusFramesAreMonoAndOtherRatesAreResampled() throws {
        let encoder = try FrameEncoder(CapturedFormat(sampleRate: 44100, channels: 2, isSixteenBit: true), encoding: .opus)
        #expect(encoder.format == (try AudioFormat(encoding: .opus, sampleRate: 48000, channels: 1)))
        var frames = try encoder.add([Float](repeating: 0, count: 2 * 44100))
        frames += try encoder.finish()
        #expect(frames.count == 50)
        for (i, frame) in frames.enumerated() {
            #expect(abs(frame.start - Double(i) * 0.02) < 1e-9 && frame.duration == 0.02)
            #expect(OpusPacket.duration(frame.bytes) == 0.02)
        }
    }

    @Test func finalsAreWrittenAsTranscribeWritesThem() {
        // The second final joins the first one's cue (too short alone), the last is split
        // (longer than a cue may last), and a cue left waiting is written by `finish`.
        let finals = [
            RecognitionResult(range: TimeRange(start: 0.29, end: 0.6), text: "yes"),
            RecognitionResult(range: TimeRange(start: 0.9, end: 1.16), text: "ever try it"),
            RecognitionResult(range: TimeRange(start: 1.822, end: 2.742), text: "as the files"),
            RecognitionResult(range: TimeRange(start: 3, end: 12),
                              text: "a final of many words that takes far longer than one cue may last on screen"),
        ]
        for format in [CaptionOutputFormat.text, .vtt, .srt, .scc, .ttml] {
            var out = ""
            let writer = CaptionWriter(format: format) { out += $0 }
            for final in finals { writer.final(final) }
            writer.finish()
            writer.finish()
            let expected = switch format {
            case .text: Captions.plainText(finals)
            case .vtt: Captions.webVTT(finals)
            case .srt: Captions.srt(finals)
            default: Captions.render(finals, as: format.file!)
            }
            #expect(out == expected, "\(format)")
            if format == .vtt || format == .srt { #expect(out.contains("\nyes ever try it\n"), "\(out)") }
        }
        var jsonl = ""
        let writer = CaptionWriter(format: .jsonl) { jsonl += $0 }
        let text = #"{"type":"final","seq":3,"start":0.29,"end":1.16,"text":"ever try it","words":[{"word":"ever","start":0.29,"end":0.5,"confidence":0.9}]}"#
        let message = ServerMessage(text)!
        writer.event(message)
        writer.final(message.result!)
        #expect(jsonl == text + "\n")
        #expect(message.result?.words.first?.text == "ever" && message.seq == 3)
        #expect(ServerMessage("not json") == nil && ServerMessage(#"{"seq":1}"#) == nil)
    }
}
