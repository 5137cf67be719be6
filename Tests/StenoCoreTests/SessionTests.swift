import Testing
@testable import StenoCore

// MARK: - Harness

/// Drives a SessionMachine and keeps a readable log of what it asked for. It numbers the
/// events it is sent as the connection would (the machine leaves `seq` to the connection).
struct Harness {
    var machine: SessionMachine
    var now: Double = 100
    /// Every event sent so far, in order.
    var sent: [EncodedEvent] = []
    /// Every action so far, in order.
    var all: [SessionAction] = []

    static let wall = UTCTime(millisecondsSince1970: 1_741_356_309_042)

    init(limits: SessionLimits = SessionLimits(), progressInterval: Double = 1, resumeToken: String? = nil) {
        machine = SessionMachine(id: "s-1",
                                 configuration: SessionConfiguration(engine: testEngine, limits: limits,
                                                                     progressInterval: progressInterval),
                                 now: 100, resumeToken: resumeToken)
    }

    /// Feeds one input; returns its actions described as short strings.
    @discardableResult
    mutating func feed(_ input: SessionInput) -> [String] {
        var actions: [SessionAction] = []
        for action in machine.handle(input) {
            guard case .send(let event) = action else {
                actions.append(action)
                continue
            }
            #expect(event.seq == 0, "the machine does not number events")
            let numbered = event.numbered(UInt64(sent.count + 1))
            sent.append(numbered)
            actions.append(.send(numbered))
        }
        all += actions
        return actions.map(Self.describe)
    }

    @discardableResult
    mutating func text(_ text: String) -> [String] { feed(.text(text, now: now, wallClock: Self.wall)) }

    @discardableResult
    mutating func audio(_ bytes: [UInt8]) -> [String] { feed(.audio(bytes, now: now)) }

    /// Streams PCM s16 mono 16 kHz silence in frames of at most 1 s (the frame limit is 64 KiB).
    mutating func stream(seconds: Double) {
        var left = seconds
        while left > 0 {
            let piece = min(left, 1)
            audio(Self.pcm(seconds: piece))
            left -= piece
        }
    }

    @discardableResult
    mutating func results(_ events: [TranscriberEvent], analyzed: Double? = nil) -> [String] {
        feed(.results(events, analyzedThrough: analyzed, now: now))
    }

    @discardableResult
    mutating func tick(at time: Double) -> [String] {
        now = time
        return feed(.tick(now: time))
    }

    /// `start`; `format` nil leaves the text format to the default (readable). These tests are
    /// about the protocol, so they ask for the recognizer's words as they are.
    @discardableResult
    mutating func start(_ encoding: String = "pcm_s16le", rate: Int = 16000, channels: Int = 1,
                        extra: String = "", format: String? = "raw") -> [String] {
        let chosen = format.map { #","format":"\#($0)""# } ?? ""
        return text(#"{"type":"start","audio":{"encoding":"\#(encoding)","sampleRate":\#(rate),"channels":\#(channels)}\#(chosen)\#(extra)}"#)
    }

    /// PCM s16 mono silence of the given length at 16 kHz.
    static func pcm(seconds: Double, rate: Int = 16000, bytesPerFrame: Int = 2) -> [UInt8] {
        [UInt8](repeating: 0, count: Int(seconds * Double(rate) + 0.5) * bytesPerFrame)
    }

    static func describe(_ action: SessionAction) -> String {
        switch action {
        case .send(let event):
            return event.kind == .ready ? "ready#\(event.seq)" : event.text
        case .startPipeline(let request):
            return "startPipeline \(request.audio)"
        case .submitAudio(let chunk):
            var w = JSONWriter()
            w.seconds(chunk.start)
            let start = w.text
            var d = JSONWriter()
            d.seconds(chunk.duration)
            return "audio \(start)+\(d.text)" + (chunk.headerIsMalformed ? " malformed" : "")
        case .submitFinalize(let through):
            var w = JSONWriter()
            w.seconds(through)
            return "finalize \(w.text)"
        case .submitEnd:
            return "end"
        case .cancelPipeline:
            return "cancelPipeline"
        case .submitGap(let duration):
            return "gap \(JSONWriter.secondsText(duration))"
        case .resume(let request):
            return "resume \(request.session) after \(request.after)"
        case .pauseReading:
            return "pause"
        case .resumeReading:
            return "resume"
        case .close(let code, let reason):
            return "close \(code) \(reason)"
        }
    }
}

func errorEvent(_ seq: Int, _ code: ErrorCode, _ message: String) -> String {
    ServerEvent.error(StenoError(code, message)).encoded(seq: UInt64(seq)).text
}

/// Every input kind, for "nothing after close" checks.
let everyInput: [SessionInput] = [
    .text(#"{"type":"finalize"}"#, now: 500, wallClock: Harness.wall),
    .text(#"{"type":"start","audio":{"encoding":"opus","sampleRate":48000,"channels":1}}"#, now: 500, wallClock: Harness.wall),
    .textBytes([0xFF], now: 500, wallClock: Harness.wall),
    .audio([0, 0], now: 500), .frameTooLarge(bytes: 1 << 30),
    .results([.final(result(0, 1, "late"))], analyzedThrough: 1, now: 500),
    .finalizeCompleted, .endCompleted, .pipelineWarning(StenoError(.badAudio, "x")), .pipelineFailed("x"),
    .tick(now: 10_000), .shutdown, .shutdownDeadline, .outboundOverflow, .peerClosed,
]

// MARK: - Starting

@Suite struct SessionStartTests {
    @Test func startIsAnsweredWithPipelineThenReady() {
        var h = Harness()
        #expect(h.machine.phase == .awaitingStart)
        #expect(h.start(extra: #","language":"en-US","channel":"studio-a""#)
            == ["startPipeline pcm_s16le 16000 Hz mono", "ready#1"])
        #expect(h.machine.phase == .streaming)
        #expect(h.machine.request?.channel == "studio-a")
        #expect(h.machine.startedAt == Harness.wall)
        #expect(h.sent[0].text.hasPrefix(#"{"type":"ready","seq":1,"session":"s-1","startedAt":"2025-03-07T14:05:09.042Z","engine":{"name":"pocketsphinx""#))
    }

    @Test(arguments: [
        ("audio", "audio before \"start\"; start must be the first message"),
        (#"{"type":"finalize"}"#, "\"finalize\" before \"start\"; start must be the first message"),
        (#"{"type":"end"}"#, "\"end\" before \"start\"; start must be the first message"),
        (#"{"type":"cancel"}"#, "\"cancel\" before \"start\"; start must be the first message"),
    ])
    func anythingBeforeStartIsNotStarted(_ input: String, _ message: String) {
        var h = Harness()
        let actions = input == "audio" ? h.audio([0, 0]) : h.text(input)
        #expect(actions == [errorEvent(1, .notStarted, message), "close 4400 not_started"])
        #expect(h.machine.phase == .failed(.notStarted))
        for extra in everyInput { #expect(h.feed(extra) == []) }
    }

    @Test func aSecondStartIsNotStarted() {
        var h = Harness()
        h.start()
        #expect(h.start() == ["cancelPipeline",
                              errorEvent(2, .notStarted, "the session has already started; \"start\" may only come first"),
                              "close 4400 not_started"])
        // Also when the second start's audio is unsupported, and while ending.
        var h2 = Harness()
        h2.start()
        #expect(h2.start("mp3").last == "close 4400 not_started")
        var h3 = Harness()
        h3.start()
        h3.text(#"{"type":"end"}"#)
        #expect(h3.start().last == "close 4400 not_started")
    }

    @Test func badMessagesBeforeStartAreNotFatal() {
        var h = Harness()
        #expect(h.text("nonsense") == [errorEvent(1, .badMessage,
            "not valid JSON: unexpected character 'n', expected a value (at byte 0)")])
        #expect(h.text(#"{"type":"hello"}"#).count == 1)
        #expect(h.feed(.textBytes([0x22, 0xFF, 0x22], now: 100, wallClock: Harness.wall))
            == [errorEvent(3, .badMessage, "not valid JSON: a string is not valid UTF-8 (at byte 0)")])
        #expect(h.machine.phase == .awaitingStart)
        #expect(h.start() == ["startPipeline pcm_s16le 16000 Hz mono", "ready#4"])
    }

    @Test func unsupportedAudioIsFatal() {
        var h = Harness()
        #expect(h.start("opus", rate: 44100) == [
            errorEvent(1, .unsupportedAudio, "Opus sample rate must be 8000, 12000, 16000, 24000 or 48000 Hz, not 44100"),
            "close 1003 unsupported_audio"])
        #expect(h.machine.phase == .failed(.unsupportedAudio))
    }

    @Test func aLanguageTheEngineCannotServeGetsAClearErrorAndNoSession() {
        var h = Harness()
        #expect(h.start(extra: #","language":"fr-FR""#) == [errorEvent(1, .badMessage,
            "language \"fr-FR\" is not available; this server recognizes en-US")])
        #expect(h.machine.phase == .awaitingStart)
        #expect(h.machine.request == nil)
        // Audio is still refused, and the client may try again.
        var h2 = h
        #expect(h2.audio([0, 0]).last == "close 4400 not_started")
        #expect(h.start(extra: #","language":"en""#) == ["startPipeline pcm_s16le 16000 Hz mono", "ready#2"])
    }

    @Test func startWithoutLanguageGetsTheEngines() {
        var h = Harness()
        #expect(h.start().last == "ready#1")
        #expect(h.sent[0].text.contains(#""language":"en-US""#))
    }

    @Test func textFrameOverTheLimitIsTooLarge() {
        var h = Harness(limits: SessionLimits(maxFrameBytes: 64))
        let big = #"{"type":"cancel","pad":""# + String(repeating: "x", count: 64) + #""}"#
        #expect(h.text(big) == [errorEvent(1, .tooLarge, "a text frame of \(big.utf8.count) bytes is over the limit of 64 bytes"),
                                "close 1009 too_large"])
        var h2 = Harness()
        #expect(h2.feed(.frameTooLarge(bytes: 70_000)) == [
            errorEvent(1, .tooLarge, "a frame of 70000 bytes is over the limit of 65536 bytes"), "close 1009 too_large"])
    }

    @Test func textFramesUpToTheConfiguredLimitAreParsed() {
        var h = Harness(limits: SessionLimits(maxFrameBytes: 200_000))
        h.start(extra: #","pad":""# + String(repeating: "x", count: 100_000) + #"""#)
        #expect(h.machine.phase == .streaming)
    }

    @Test func unknownTypeAfterStartIsNotFatal() {
        var h = Harness()
        h.start()
        #expect(h.text(#"{"type":"pause"}"#) == [errorEvent(2, .badMessage,
            "unknown message type \"pause\"; expected start, resume, finalize, end, cancel, gap or silence")])
        #expect(h.text(#"{"type":"finalize","through":"x"}"#) == [errorEvent(3, .badMessage,
            "field \"through\" must be a number")])
        #expect(h.machine.phase == .streaming)
    }
}

// MARK: - Audio

@Suite struct SessionAudioTests {
    @Test func pcmCountsReceivedSeconds() {
        var h = Harness()
        h.start()
        #expect(h.audio(Harness.pcm(seconds: 0.1)) == ["audio 0+0.1"])
        #expect(h.audio(Harness.pcm(seconds: 0.02)) == ["audio 0.1+0.02"])
        #expect(h.machine.receivedSeconds == 0.12)
        #expect(h.audio([]) == [])
    }

    @Test func misalignedPCMIsDroppedWithBadAudio() {
        var h = Harness()
        h.start("pcm_s16le", rate: 8000, channels: 2)
        #expect(h.audio([0, 0, 0, 0, 0, 0]) == [errorEvent(2, .badAudio,
            "a pcm_s16le frame must hold whole sample frames of 4 bytes; 6 bytes dropped")])
        #expect(h.machine.receivedSeconds == 0)
        #expect(h.audio([UInt8](repeating: 0, count: 32)) == ["audio 0+0.001"])
        #expect(h.machine.phase == .streaming)

        var f = Harness()
        f.start("pcm_f32le", rate: 48000, channels: 2)
        #expect(f.audio([UInt8](repeating: 0, count: 12)).first?.contains("8 bytes") == true)
        #expect(f.audio([UInt8](repeating: 0, count: 8 * 480)) == ["audio 0+0.01"])
    }

    @Test func opusDurationsComeFromTheTOC() {
        var h = Harness()
        h.start("opus", rate: 48000)
        let twentyMs: UInt8 = 19 << 3           // CELT FB 20 ms, code 0
        let sixtyMsPair: UInt8 = 3 << 3 | 1     // SILK 60 ms, code 1: 120 ms
        #expect(h.audio([twentyMs, 1, 2, 3]) == ["audio 0+0.02"])
        #expect(h.audio([sixtyMsPair, 1, 2]) == ["audio 0.02+0.12"])
        #expect(h.machine.receivedSeconds == 0.14)
    }

    @Test func unreadableOpusIsForwardedAndCountedAsTheLastGoodPacket() {
        var h = Harness()
        h.start("opus", rate: 16000)
        // Before any good packet: 20 ms by default.
        #expect(h.audio([]) == ["audio 0+0.02 malformed",
                                errorEvent(2, .badAudio, "an Opus packet of 0 bytes has an unreadable header; concealed")])
        #expect(h.audio([17 << 3]) == ["audio 0.02+0.005"])  // CELT 5 ms
        #expect(h.audio([17 << 3 | 3, 0]) == ["audio 0.025+0.005 malformed",  // code 3, 0 frames
                                              errorEvent(3, .badAudio, "an Opus packet of 2 bytes has an unreadable header; concealed")])
        #expect(h.machine.receivedSeconds == 0.03)
        #expect(h.machine.phase == .streaming)
    }

    @Test func audioFrameOverTheLimitIsTooLarge() {
        var h = Harness(limits: SessionLimits(maxFrameBytes: 100))
        h.start()
        #expect(h.audio([UInt8](repeating: 0, count: 102)) == ["cancelPipeline",
            errorEvent(2, .tooLarge, "an audio frame of 102 bytes is over the limit of 100 bytes"), "close 1009 too_large"])
    }

    @Test func analyzedNeverPassesReceived() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.results([], analyzed: 5)
        #expect(h.machine.analyzedSeconds == 1)
        #expect(h.machine.backlogSeconds == 0)
        h.stream(seconds: 1)
        #expect(h.machine.backlogSeconds == 1)
    }
}
