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
        case .submitGap(let start, let duration):
            return "gap \(JSONWriter.secondsText(start))+\(JSONWriter.secondsText(duration))"
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

// MARK: - Results, finalize, end, cancel

@Suite struct SessionFlowTests {
    @Test func readingPausesAtTheBufferAndResumesAtHalfOfIt() {
        var h = Harness(limits: SessionLimits(bufferSeconds: 2))
        h.start()
        #expect(h.audio(Harness.pcm(seconds: 1)) == ["audio 0+1"])
        #expect(h.audio(Harness.pcm(seconds: 1)) == ["audio 1+1", "pause"])
        #expect(h.machine.isReadingPaused)
        // What was already in flight is still taken, and the pause is not repeated.
        #expect(h.audio(Harness.pcm(seconds: 0.5)) == ["audio 2+0.5"])
        #expect(h.results([], analyzed: 1) == [], "1.5 s still waiting")
        #expect(h.results([], analyzed: 1.5) == ["resume"], "down to half the buffer")
        #expect(!h.machine.isReadingPaused)
        #expect(h.results([], analyzed: 2.5) == [])
        #expect(h.audio(Harness.pcm(seconds: 2)) == ["audio 2.5+2", "pause"])
        // Closing needs no resume: nothing follows a close.
        #expect(h.text(#"{"type":"cancel"}"#).last == "close 1000 cancelled")
    }

    @Test func resultsBecomeEventsWithIncreasingSeq() {
        var h = Harness()
        h.start()
        h.stream(seconds: 2)
        #expect(h.results([.speechStarted(at: 0.3), .partial(result(0.3, 0.9, "hel"))]) == [
            #"{"type":"speech","seq":2,"state":"started","at":0.3}"#,
            #"{"type":"volatile","seq":3,"start":0.3,"end":0.9,"text":"hel","words":[]}"#])
        #expect(h.results([.final(result(0.3, 1.1, "hello", [word("hello", 0.3, 1.1, 0.8)])), .speechEnded(at: 1.2)],
                          analyzed: 1.5) == [
            #"{"type":"final","seq":4,"start":0.3,"end":1.1,"text":"hello","words":[{"word":"hello","start":0.3,"end":1.1,"confidence":0.8}]}"#,
            #"{"type":"speech","seq":5,"state":"ended","at":1.2}"#])
        #expect(h.machine.finals.map(\.text) == ["hello"])
        #expect(h.machine.analyzedSeconds == 1.5)
    }

    @Test func textIsReadableUnlessRawIsAsked() {
        var h = Harness()
        h.start(format: nil)
        h.stream(seconds: 2)
        #expect(h.results([.final(result(0.3, 1.1, "i saw it", [word("i", 0.3, 0.5), word("saw", 0.5, 0.8), word("it", 0.8, 1.1)])),
                           .speechEnded(at: 1.2)], analyzed: 1.5) == [
            #"{"type":"final","seq":2,"start":0.3,"end":1.1,"text":"I saw it.","words":[{"word":"I","start":0.3,"end":0.5,"confidence":0.9},{"word":"saw","start":0.5,"end":0.8,"confidence":0.9},{"word":"it.","start":0.8,"end":1.1,"confidence":0.9}]}"#,
            #"{"type":"speech","seq":3,"state":"ended","at":1.2}"#])
    }

    @Test func volatileAndWordsFollowTheStartRequest() {
        var h = Harness()
        h.start(extra: #","volatile":false,"words":false"#)
        h.stream(seconds: 1)
        #expect(h.results([.partial(result(0, 0.5, "hel")), .final(result(0, 0.6, "hello", [word("hello", 0, 0.6)]))])
            == [#"{"type":"final","seq":2,"start":0,"end":0.6,"text":"hello"}"#])
        #expect(h.machine.includesWords == false)
    }

    @Test func finalizeRepliesWithItsFinalsThenFinalized() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1.5)
        #expect(h.text(#"{"type":"finalize"}"#) == ["finalize 1.5"])
        #expect(h.machine.phase == .finalizing)
        // Audio after the message does not move T.
        h.stream(seconds: 0.5)
        h.results([.final(result(0.2, 1.4, "hello there"))])
        #expect(h.feed(.finalizeCompleted) == [#"{"type":"finalized","seq":3,"through":1.5}"#])
        #expect(h.machine.phase == .streaming)
        // A stray completion is ignored.
        #expect(h.feed(.finalizeCompleted) == [])
    }

    @Test func finalizeThroughIsClampedToWhatWasReceived() {
        var h = Harness()
        h.start()
        h.stream(seconds: 2)
        #expect(h.text(#"{"type":"finalize","through":0.75}"#) == ["finalize 0.75"])
        #expect(h.text(#"{"type":"finalize","through":99}"#) == ["finalize 2"])
        #expect(h.feed(.finalizeCompleted) == [#"{"type":"finalized","seq":2,"through":0.75}"#])
        #expect(h.feed(.finalizeCompleted) == [#"{"type":"finalized","seq":3,"through":2}"#])
    }

    @Test func finalizeWithoutAFinalClearsAVolatileItCovers() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.results([.partial(result(0.2, 0.8, "mm"))])
        h.text(#"{"type":"finalize"}"#)
        #expect(h.feed(.finalizeCompleted) == [
            #"{"type":"volatile","seq":3,"start":0.2,"end":0.2,"text":"","words":[]}"#,
            #"{"type":"finalized","seq":4,"through":1}"#])
    }

    @Test func finalizeKeepsAVolatileAfterItsThrough() {
        var h = Harness()
        h.start()
        h.stream(seconds: 3)
        h.results([.final(result(0, 1, "one")), .partial(result(2.1, 2.9, "tw"))])
        h.text(#"{"type":"finalize","through":2}"#)
        #expect(h.feed(.finalizeCompleted) == [#"{"type":"finalized","seq":4,"through":2}"#])
        #expect(h.machine.showingVolatile?.text == "tw")
    }

    @Test func endDeliversFinalsThenEndedThenCloses() {
        var h = Harness()
        h.start()
        h.stream(seconds: 2.5)
        #expect(h.text(#"{"type":"end"}"#) == ["end"])
        #expect(h.machine.phase == .ending(.requested))
        h.results([.partial(result(1.5, 2.4, "goodby"))])
        #expect(h.results([.final(result(1.5, 2.4, "goodbye"))], analyzed: 2.5).count == 1)
        #expect(h.feed(.endCompleted) == [#"{"type":"ended","seq":4,"duration":2.5}"#, "close 1000 ended"])
        #expect(h.machine.phase == .ended)
        for input in everyInput { #expect(h.feed(input) == []) }
    }

    @Test func endClearsAVolatileNothingFinalized() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.results([.partial(result(0.5, 0.9, "uh"))])
        h.text(#"{"type":"end"}"#)
        #expect(h.feed(.endCompleted) == [
            #"{"type":"volatile","seq":3,"start":0.5,"end":0.5,"text":"","words":[]}"#,
            #"{"type":"ended","seq":4,"duration":1}"#, "close 1000 ended"])
    }

    @Test func endAnswersOutstandingFinalizesFirst() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.text(#"{"type":"finalize"}"#)
        h.text(#"{"type":"end"}"#)
        #expect(h.feed(.endCompleted) == [#"{"type":"finalized","seq":2,"through":1}"#,
                                          #"{"type":"ended","seq":3,"duration":1}"#, "close 1000 ended"])
    }

    @Test func afterEnd() {
        var h = Harness()
        h.start()
        h.text(#"{"type":"end"}"#)
        // Audio: dropped; told once.
        #expect(h.audio(Harness.pcm(seconds: 0.1)) == [errorEvent(2, .badMessage, "audio after \"end\" is ignored")])
        #expect(h.audio(Harness.pcm(seconds: 0.1)) == [])
        #expect(h.machine.receivedSeconds == 0)
        #expect(h.text(#"{"type":"finalize"}"#) == [errorEvent(3, .badMessage, "the session is ending; \"finalize\" is ignored")])
        #expect(h.text(#"{"type":"end"}"#) == [errorEvent(4, .badMessage, "the session is already ending; \"end\" is ignored")])
        // Cancel is honoured.
        #expect(h.text(#"{"type":"cancel"}"#) == ["cancelPipeline", #"{"type":"cancelled","seq":5,"through":0}"#,
                                                  "close 1000 cancelled"])
        #expect(h.feed(.endCompleted) == [])
    }

    @Test func cancelSendsOnlyCancelledThroughWhatWasAnalyzed() {
        var h = Harness()
        h.start()
        h.stream(seconds: 3)
        h.results([.final(result(0, 1.2, "one")), .partial(result(1.3, 1.8, "tw"))], analyzed: 1.9)
        #expect(h.text(#"{"type":"cancel"}"#) == ["cancelPipeline", #"{"type":"cancelled","seq":4,"through":1.9}"#,
                                                  "close 1000 cancelled"])
        #expect(h.machine.phase == .cancelled)
        // Late pipeline output is discarded, the volatile is never cleared on the wire.
        #expect(h.results([.final(result(1.3, 2.0, "two"))], analyzed: 2.5) == [])
        #expect(h.machine.finals.map(\.text) == ["one"])
    }

    @Test func cancelThroughUsesTheLastFinalWhenAnalysisWasNotReported() {
        var h = Harness()
        h.start()
        h.stream(seconds: 3)
        h.results([.final(result(0, 2.2, "one"))])
        #expect(h.text(#"{"type":"cancel"}"#)[1] == #"{"type":"cancelled","seq":3,"through":2.2}"#)
    }

    @Test func cancelWhileFinalizingDropsTheFinalize() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.text(#"{"type":"finalize"}"#)
        #expect(h.text(#"{"type":"cancel"}"#).last == "close 1000 cancelled")
        #expect(h.feed(.finalizeCompleted) == [])
    }
}

// MARK: - Clock, limits, failures

@Suite struct SessionLifecycleTests {
    @Test func progressAtMostOncePerIntervalWhileAudioFlows() {
        var h = Harness()
        h.start()
        #expect(h.tick(at: 101) == [])  // nothing received yet
        h.stream(seconds: 0.5)
        #expect(h.tick(at: 101.5) == [#"{"type":"progress","seq":2,"received":0.5,"analyzed":0}"#])
        h.stream(seconds: 0.5)
        #expect(h.tick(at: 102.0) == [])  // too soon
        #expect(h.tick(at: 102.5) == [#"{"type":"progress","seq":3,"received":1,"analyzed":0}"#])
        #expect(h.tick(at: 103.5) == [])  // nothing changed
        h.results([], analyzed: 1)
        #expect(h.tick(at: 103.6) == [#"{"type":"progress","seq":4,"received":1,"analyzed":1}"#])
        #expect(h.sent.last?.isReplaceable == true)
    }

    @Test func progressContinuesWhileEnding() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.text(#"{"type":"end"}"#)
        h.results([], analyzed: 0.5)
        #expect(h.tick(at: 101).first?.contains(#""type":"progress""#) == true)
    }

    @Test func idleBeforeStartClosesAtOnce() {
        var h = Harness(limits: SessionLimits(idleTimeoutSeconds: 10, startTimeoutSeconds: 0))
        #expect(h.tick(at: 109.9) == [])
        #expect(h.tick(at: 110) == [errorEvent(1, .idle, "no \"start\" message for 10 s"), "close 4010 idle"])
    }

    @Test func aConnectionThatNeverStartsIsClosedAtTheStartDeadlineWhateverItSends() {
        var h = Harness(limits: SessionLimits(idleTimeoutSeconds: 0, startTimeoutSeconds: 5))
        h.now = 102
        #expect(h.text(#"{"type":"nonsense"}"#).first?.contains("bad_message") == true)
        h.now = 104.9
        #expect(h.text("not json").first?.contains("bad_message") == true)
        #expect(h.tick(at: 104.99) == [])
        #expect(h.tick(at: 105) == [errorEvent(3, .idle, "no \"start\" message within 5 s of connecting"), "close 4010 idle"])
        // Once started, the deadline is over.
        var started = Harness(limits: SessionLimits(idleTimeoutSeconds: 0, startTimeoutSeconds: 5))
        started.start()
        #expect(started.tick(at: 200) == [])
    }

    @Test func idleInASessionFinalizesFirst() {
        var h = Harness(limits: SessionLimits(idleTimeoutSeconds: 10))
        h.start()
        h.stream(seconds: 1)
        h.now = 105
        h.text(#"{"type":"pause"}"#)  // any frame counts as activity
        #expect(h.tick(at: 114.9).contains("end") == false)
        #expect(h.tick(at: 115) == ["end"])
        #expect(h.machine.phase == .ending(.idle))
        #expect(h.results([.final(result(0, 0.8, "last words"))]).count == 1)
        #expect(h.feed(.endCompleted) == [errorEvent(5, .idle, "no audio and no message for 10 s"), "close 4010 idle"])
        #expect(h.machine.phase == .failed(.idle))
    }

    @Test func analysisProgressIsNotIdleness() {
        // A buffer the audio fits in: reading is not paused (which would stop the clock).
        var h = Harness(limits: SessionLimits(bufferSeconds: 60, idleTimeoutSeconds: 10))
        h.start()
        h.stream(seconds: 30)
        h.now = 108
        h.results([], analyzed: 5)
        #expect(h.tick(at: 117).contains("end") == false)
        #expect(h.tick(at: 118).contains("end"))
    }

    /// protocol.md: idle time is not counted while the server itself holds the client back.
    /// A session paused at its buffer whose analysis stalls (it waits for a decoder, on a loaded
    /// machine) is not idle however long that takes; the clock starts again at the resume.
    @Test func noIdleWhileReadingIsPausedAndTheClockRestartsAtTheResume() {
        var h = Harness(limits: SessionLimits(bufferSeconds: 2, idleTimeoutSeconds: 10))
        h.start()
        #expect(h.audio(Harness.pcm(seconds: 2)) == ["audio 0+2", "pause"])
        #expect(h.tick(at: 200).contains("end") == false)
        #expect(h.machine.nextTickDue > 200)
        h.now = 250
        #expect(h.results([], analyzed: 1) == ["resume"])
        #expect(h.tick(at: 259.9).contains("end") == false)
        #expect(h.tick(at: 260).contains("end"))
    }

    @Test func noIdleWhileAFinalizeIsOutstanding() {
        var h = Harness(limits: SessionLimits(idleTimeoutSeconds: 10))
        h.start()
        h.text(#"{"type":"finalize"}"#)
        #expect(h.tick(at: 200) == [])
        h.feed(.finalizeCompleted)
        #expect(h.tick(at: 201) == ["end"])
    }

    @Test func sessionLimitFinalizesThenCloses4009() {
        var h = Harness(limits: SessionLimits(maxSessionSeconds: 60, idleTimeoutSeconds: 0))
        h.start()
        h.stream(seconds: 1)
        #expect(h.tick(at: 159.9).contains("end") == false)
        #expect(h.tick(at: 160).first == "end")
        // Audio during the wind-down is dropped silently.
        #expect(h.audio(Harness.pcm(seconds: 1)) == [])
        h.results([.final(result(0, 1, "bye"))])
        #expect(h.feed(.endCompleted) == [errorEvent(4, .sessionLimit, "the session reached its maximum duration of 60 s"),
                                          "close 4009 session_limit"])
    }

    @Test func zeroMeansNoLimit() {
        var h = Harness(limits: SessionLimits(maxSessionSeconds: 0, idleTimeoutSeconds: 0))
        h.start()
        #expect(h.tick(at: 1e9) == [])
    }

    @Test func shutdown() {
        var waiting = Harness()
        #expect(waiting.feed(.shutdown) == [errorEvent(1, .shuttingDown, "the server is shutting down"),
                                            "close 1001 shutting_down"])

        var streaming = Harness()
        streaming.start()
        streaming.stream(seconds: 1)
        #expect(streaming.feed(.shutdown) == ["end"])
        #expect(streaming.feed(.shutdown) == [])
        streaming.results([.final(result(0, 1, "finals first"))])
        #expect(streaming.feed(.endCompleted) == [errorEvent(3, .shuttingDown, "the server is shutting down"),
                                                  "close 1001 shutting_down"])

        var ending = Harness()
        ending.start()
        ending.text(#"{"type":"end"}"#)
        #expect(ending.feed(.shutdown) == [])
        #expect(ending.feed(.endCompleted).last == "close 1000 ended")

        var slow = Harness()
        slow.start()
        slow.feed(.shutdown)
        #expect(slow.feed(.shutdownDeadline) == ["cancelPipeline",
            errorEvent(2, .shuttingDown, "the server is shutting down"), "close 1001 shutting_down"])
    }

    @Test func outboundOverflowIsSlowConsumer() {
        var h = Harness()
        h.start()
        #expect(h.feed(.outboundOverflow) == ["cancelPipeline",
            errorEvent(2, .slowConsumer, "the client is not reading: over 1048576 bytes of events unsent"),
            "close 4008 slow_consumer"])
    }

    @Test func pipelineFailureIsInternalAfterTheFinalsSoFar() {
        var h = Harness()
        h.start()
        h.stream(seconds: 1)
        h.results([.final(result(0, 1, "kept"))])
        #expect(h.feed(.pipelineFailed("recognizer crashed")) == ["cancelPipeline",
            errorEvent(3, .internal, "recognizer crashed"), "close 1011 internal"])
        #expect(h.sent.map(\.kind) == [.ready, .final, .error])
    }

    @Test func pipelineWarnings() {
        var h = Harness()
        h.start("opus", rate: 48000)
        #expect(h.feed(.pipelineWarning(StenoError(.badAudio, "undecodable Opus packet; concealed")))
            == [errorEvent(2, .badAudio, "undecodable Opus packet; concealed")])
        #expect(h.feed(.pipelineWarning(StenoError(.internal, "decoder gone"))).last == "close 1011 internal")
    }

    @Test func peerClosedStopsEverythingSilently() {
        var h = Harness()
        h.start()
        #expect(h.feed(.peerClosed) == ["cancelPipeline"])
        #expect(h.machine.phase == .disconnected)
        for input in everyInput { #expect(h.feed(input) == []) }

        var early = Harness()
        #expect(early.feed(.peerClosed) == [])
    }
}

// MARK: - Invariants under arbitrary input

@Suite struct SessionInvariantTests {
    /// Any sequence of inputs: seq is 1, 2, 3 … in order; a fatal error is followed by a close
    /// with its code; a close is the last action ever; nothing traps.
    @Test func randomInputSequencesKeepTheRules() throws {
        var rng: UInt64 = 12345
        func next(_ n: Int) -> Int {
            rng = rng &* 6364136223846793005 &+ 1442695040888963407
            return Int((rng >> 33) % UInt64(n))
        }
        let texts = [
            #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#,
            #"{"type":"start","audio":{"encoding":"opus","sampleRate":48000,"channels":1},"volatile":false}"#,
            #"{"type":"start","audio":{"encoding":"opus","sampleRate":44100,"channels":1}}"#,
            #"{"type":"start","audio":{"encoding":"opus","sampleRate":48000,"channels":1},"language":"de"}"#,
            #"{"type":"finalize"}"#, #"{"type":"finalize","through":0.5}"#, #"{"type":"end"}"#, #"{"type":"cancel"}"#,
            "{", #"{"type":"x"}"#, "[]",
        ]
        for _ in 0..<400 {
            var h = Harness(limits: SessionLimits(maxSessionSeconds: 50, idleTimeoutSeconds: 20))
            var analyzed = 0.0
            for _ in 0..<40 {
                switch next(12) {
                case 0, 1: h.text(texts[next(texts.count)])
                case 2, 3, 4:
                    let sizes = [0, 1, 2, 3, 320, 321, 641]
                    let packet = [UInt8](repeating: UInt8(next(256)), count: sizes[next(sizes.count)])
                    h.audio(packet)
                case 5:
                    analyzed += Double(next(100)) / 100
                    let t = Double(next(500)) / 100
                    let events: [TranscriberEvent] = [
                        .partial(result(t, t + 0.5, ["", "a", "a b"][next(3)])),
                        .final(result(t, t + Double(next(100)) / 100, ["", "x", "x y"][next(3)])),
                        .speechStarted(at: t), .speechEnded(at: t),
                    ]
                    h.results([events[next(events.count)]], analyzed: analyzed)
                case 6: h.feed(.finalizeCompleted)
                case 7: h.feed(.endCompleted)
                case 8: h.tick(at: h.now + Double(next(30)))
                case 9: h.feed([.shutdown, .shutdownDeadline, .outboundOverflow, .peerClosed,
                                .pipelineFailed("boom"), .pipelineWarning(StenoError(.badAudio, "w"))][next(6)])
                default: h.tick(at: h.now + 0.5)
                }
            }
            // seq is gapless and ordered.
            #expect(h.sent.enumerated().allSatisfy { $0.element.seq == UInt64($0.offset + 1) })
            // A close is last and unique; a fatal error is immediately followed by its close.
            let closes = h.all.indices.filter { if case .close = h.all[$0] { return true } else { return false } }
            #expect(closes.count <= 1)
            if let close = closes.first { #expect(close == h.all.count - 1) }
            for (index, action) in h.all.enumerated() {
                guard case .send(let event) = action, event.kind == .error,
                      case .object(let object) = try JSONParser().parse(event.bytes),
                      object["fatal"] == .bool(true),
                      case .string(let codeName) = object["code"], let code = ErrorCode(rawValue: codeName) else { continue }
                #expect(index + 1 < h.all.count)
                if index + 1 < h.all.count {
                    #expect(h.all[index + 1] == .close(code: code.closeCode ?? 0, reason: code.rawValue))
                }
            }
            // Finals on the wire never overlap.
            var lastEnd = 0.0
            for event in h.sent where event.kind == .final {
                guard case .object(let object) = try JSONParser().parse(event.bytes),
                      case .number(let start) = object["start"], case .number(let end) = object["end"] else { continue }
                #expect(start >= lastEnd && end >= start)
                lastEnd = end
            }
        }
    }
}
