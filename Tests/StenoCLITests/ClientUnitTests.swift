import StenoCore
import StenoTransport
import Testing
@testable import steno

/// The clients' parts that need no server: buffering, timelines, the start/resume choice,
/// retries, de-duplication, framing, output, command lines.
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
        for format in [CaptionOutputFormat.text, .vtt, .srt] {
            var out = ""
            let writer = CaptionWriter(format: format) { out += $0 }
            for final in finals { writer.final(final) }
            writer.finish()
            writer.finish()
            let expected = switch format {
            case .text: Captions.plainText(finals)
            case .vtt: Captions.webVTT(finals)
            default: Captions.srt(finals)
            }
            #expect(out == expected, "\(format)")
            if format != .text { #expect(out.contains("\nyes ever try it\n"), "\(out)") }
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

@Suite struct ClientCommandLineTests {
    func send(_ arguments: [String], _ environment: [String: String] = [:]) throws -> SendOptions {
        try #require(try SendOptions.parse(arguments, environment: environment))
    }

    func sendProblem(_ arguments: [String]) -> UsageError.Problem? {
        do {
            _ = try SendOptions.parse(arguments, environment: [:])
            return nil
        } catch {
            return error.problem
        }
    }

    @Test func sendInputsAndDefaults() throws {
        let file = try send(["talk.wav"])
        #expect(file.input == .file("talk.wav") && file.encoding == .opus && !file.fast && file.bufferSeconds == 60)
        #expect(file.client.server == WebSocketURL("ws://127.0.0.1:8080") && file.client.format == .text)
        #expect(file.client.url("/v1/stream").description == "ws://127.0.0.1:8080/v1/stream")
        #expect(file.text == .readable)
        #expect(try send(["a.wav", "--text", "raw"]).text == .raw)
        let raw = try send(["-", "--raw-rate", "48000", "--raw-channels=2", "--raw-format", "f32le", "--encoding", "pcm"])
        #expect(raw.input == .standardInput(raw: RawPCMFormat(sampleRate: 48000, channels: 2, sample: .f32le)))
        #expect(try send(["-"]).input == .standardInput(raw: nil))
        let device = try send(["--device", "hw:1", "--rate", "48000", "--channel", "studio-a", "--fast"])
        #expect(device.input == .device(name: "hw:1", sampleRate: 48000, channels: 1) && device.channel == "studio-a")
        #expect(try send(["--list-devices"]).listDevices)
        let phrases = try send(["talk.wav", "--phrases", "names.txt", "--boost", "0.5"])
        #expect(phrases.phrasesFile == "names.txt" && phrases.boost == 0.5)
        #expect(try send(["talk.wav"]).phrasesFile == nil)
        let environment = try send(["a.wav"], ["STENO_SERVER": "wss://captions.example/steno/", "STENO_TOKEN": "t0k",
                                               "STENO_CA": "/ca.pem"])
        #expect(environment.client.token == "t0k" && environment.client.caFile == "/ca.pem")
        #expect(environment.client.url("/v1/listen?channel=x").description == "wss://captions.example/steno/v1/listen?channel=x")
        let retries = try send(["a.wav", "--retry-for", "5", "--retry-max", "0.5", "--format", "srt", "--log-level", "warn"])
        #expect(retries.client.reconnection.giveUpAfter == 5 && retries.client.reconnection.maxDelay == 0.5)
        #expect(retries.client.format == .srt && retries.client.logLevel == .warning)
    }

    /// `--profanity` goes into the `start` a new session is opened with; without it the start
    /// says nothing and the server's default applies.
    @Test func sendsProfanityChoiceIsInItsStart() throws {
        let audio = try AudioFormat(encoding: .opus, sampleRate: 48000, channels: 1)
        for mode in ProfanityMode.allCases {
            let options = try send(["talk.wav", "--profanity", mode.rawValue, "--language", "en-GB", "--text", "raw"])
            #expect(options.profanity == mode)
            let start = options.startText(audio)
            #expect(start.contains(#""profanity":"\#(mode.rawValue)""#), "\(start)")
            guard case .start(let request) = try ClientMessage.parse(start) else {
                Issue.record("not a start: \(start)")
                continue
            }
            #expect(request.profanity == mode && request.language == "en-GB" && request.format == .raw)
        }
        let plain = try send(["talk.wav"])
        #expect(plain.profanity == nil && !plain.startText(audio).contains("profanity"))
        guard case .start(let request) = try ClientMessage.parse(plain.startText(audio)) else { return }
        #expect(request.profanity == nil && request.model == nil)
        // `--model` names the server's model (1-64 characters, as `start` takes it).
        guard case .start(let chosen) = try ClientMessage.parse(try send(["talk.wav", "--model", "en-us"]).startText(audio)) else { return }
        #expect(chosen.model == "en-us")
        #expect(sendProblem(["talk.wav", "--model", ""]) != nil && sendProblem(["talk.wav", "--model", String(repeating: "m", count: 65)]) != nil)
    }

    @Test func sendRefusesWhatDoesNotFit() {
        #expect(sendProblem([]) == .missingArgument("INPUT (a WAV file, or - for standard input) or --device"))
        #expect(sendProblem(["a.wav", "--device", "hw:0"]) == .conflict("INPUT", "--device"))
        #expect(sendProblem(["a.wav", "--raw-rate", "16000"]) != nil)
        #expect(sendProblem(["-", "--raw-format", "s16le"]) != nil)  // raw needs its rate
        #expect(sendProblem(["-", "--raw-rate", "96000"]) != nil)
        #expect(sendProblem(["a.wav", "--rate", "16000"]) != nil)
        #expect(sendProblem(["a.wav", "--server", "http://x"]) != nil)
        #expect(sendProblem(["a.wav", "--ca", "/c.pem"]) != nil)  // not wss
        #expect(sendProblem(["a.wav", "--channel", "no spaces"]) != nil)
        #expect(sendProblem(["a.wav", "--encoding", "mp3"]) != nil)
        #expect(sendProblem(["a.wav", "b.wav"]) == .unexpectedArgument("b.wav"))
        #expect(sendProblem(["a.wav", "--boost", "2"]) == .requires(option: "--boost", other: "--phrases", reason: "it scales the phrases"))
        #expect(sendProblem(["a.wav", "--phrases", "p.txt", "--boost", "0"]) != nil)
        #expect(sendProblem(["a.wav", "--fats"]) == .unknownOption("--fats", suggestion: "--fast"))
        #expect(sendProblem(["a.wav", "--profanity", "bleep"]) != nil)
    }

    @Test func listenNeedsAChannel() throws {
        let options = try #require(try ListenOptions.parse(["--channel", "room-1", "--format", "jsonl"], environment: [:]))
        #expect(options.channel == "room-1" && options.client.format == .jsonl)
        #expect(throws: UsageError.self) { try ListenOptions.parse([], environment: [:]) }
        #expect(throws: UsageError.self) { try ListenOptions.parse(["--channel", ".."], environment: [:]) }
        #expect(throws: UsageError.self) { try ListenOptions.parse(["--channel", "a", "extra"], environment: [:]) }
        #expect(ListenOptions.spec.helpText().contains("Exit codes: 0 done"))
    }
}

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
