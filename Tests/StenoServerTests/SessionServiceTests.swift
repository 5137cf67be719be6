import Foundation
import StenoCore
import StenoSystem
import StenoTransport
import Testing
@testable import StenoServer

/// The service's behaviour on `/v1/stream`, in memory: the real Router and sessions, driven as
/// the transport would drive them, on memory connections (`MemoryConnections`), with the
/// scripted engine and a manual worker pool. The test decides when the lanes run (`settle`),
/// when a client reads its queue, and what time the session machines are told at a tick
/// (`tick(at:)`, times chosen around readings of the clock): nothing here sleeps, and no
/// outcome depends on how long anything takes.
///
/// The scripted engine hears 2048-sample blocks (0.128 s at 16 kHz): a block of tone is a word
/// `wN`, a silent block after speech ends the utterance with a final.
///
/// Covered: every row of docs/protocol.md's error table that the service produces, finalize /
/// end / cancel, inbound and outbound backpressure, and the drain. Left to the live tests:
/// what only the transport does (UTF-8 validation of text frames, fragments, TCP flow control,
/// close frames and resets on the wire, keepalive), resuming on a new connection (the memory
/// connections keep no written events to hand over), and `StenoServer.drain`'s closing of
/// viewers and its timeout.
@Suite struct SessionServiceTests {
    // MARK: - Helpers

    /// One block of the scripted engine: 2048 samples.
    static let block = 2048
    static let blockSeconds = 0.128

    /// `blocks` blocks of 16 kHz s16le mono: tone when `speech`, else silence.
    static func audio(_ blocks: Int, speech: Bool) -> [UInt8] { MemoryServer.pcm(samples: blocks * block, speech: speech) }

    static func speech(_ blocks: Int) -> [UInt8] { audio(blocks, speech: true) }
    static func silence(_ blocks: Int) -> [UInt8] { audio(blocks, speech: false) }

    /// A server whose only timers are the ones a test turns on: the stall and the start
    /// deadline count real seconds between ticks, which a slow run could reach.
    static func server(recognizers: Int = 4, _ configure: (inout ServerOptions) -> Void = { _ in }) -> MemoryServer {
        MemoryServer(recognizers: recognizers) {
            $0.limits.stallSeconds = 0
            $0.limits.startTimeoutSeconds = 0
            configure(&$0)
        }
    }

    /// `start` for 16 kHz s16le mono, with the recognizer's words as they are (no capitals or
    /// full stops: the scripted words are `w1 w2 …`).
    static let start = #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1},"format":"raw"}"#
    static let end = #"{"type":"end"}"#
    static let finalize = #"{"type":"finalize"}"#
    static let cancel = #"{"type":"cancel"}"#

    /// A connection that has sent `start` (and, unless `settled` is false, whose recognizer is
    /// made).
    static func started(_ server: MemoryServer, _ start: String = Self.start, settled: Bool = true) throws -> ConnectionID {
        let id = try #require(server.connect().1)
        server.send(id, start)
        if settled { server.settle() }
        return id
    }

    /// The router's tick at `now` (monotonic seconds), a time the test chooses: the session
    /// machines have no clock of their own. It visits the sessions due by then, so the timers
    /// tested with it fire for sessions that no tick visited before (TickScheduleTests).
    static func tick(_ server: MemoryServer, at now: Double) {
        server.router.tick(now: now)
    }

    /// The event types, without `progress` (sent at most once a second of real time, so when
    /// exactly is not the test's to decide) and, unless asked for, without `volatile` and
    /// `speech` (how many of those are left unread depends on when the client reads).
    static func kinds(_ events: [JSONObject], all: Bool = false) -> [String] {
        events.map(\.type).filter { $0 != "progress" && (all || ($0 != "volatile" && $0 != "speech")) }
    }

    static func finals(_ events: [JSONObject]) -> [(text: String, start: Double, end: Double)] {
        events.filter { $0.type == "final" }.map { ($0.text("text") ?? "", $0.number("start") ?? -1, $0.number("end") ?? -1) }
    }

    /// `seq` 1, 2, 3 … with no gap, as the client read them.
    static func expectNumbered(_ events: [JSONObject], sourceLocation: SourceLocation = #_sourceLocation) {
        let seqs = events.map { Int($0.number("seq") ?? -1) }
        #expect(seqs == (0..<seqs.count).map { $0 + 1 }, "seq \(seqs)", sourceLocation: sourceLocation)
    }

    /// The last event is a fatal `code` and the close that follows it is `close` with the code as
    /// its reason.
    static func expectFatal(_ server: MemoryServer, _ id: ConnectionID, _ code: String, close: UInt16, _ what: String = "",
                            sourceLocation: SourceLocation = #_sourceLocation) {
        let events = server.events(id)
        let last = events.last
        #expect(last?.type == "error" && last?.text("code") == code && last?.flag("fatal") == true,
                "\(what): last event \(last.map { "\($0.type) \($0.text("code") ?? "")" } ?? "none"), expected a fatal \(code); \(kinds(events, all: true))",
                sourceLocation: sourceLocation)
        let request = server.connections.closeRequest(id)
        #expect(request?.code == close && request?.reason == code,
                "\(what): close \(request.map { "\($0.code) \($0.reason)" } ?? "none"), expected \(close) \(code)",
                sourceLocation: sourceLocation)
        expectNumbered(events, sourceLocation: sourceLocation)
    }

    /// A started session, with nothing sent yet, gets the final of an utterance and ends.
    static func expectItWorks(_ server: MemoryServer, _ id: ConnectionID, _ what: String,
                              sourceLocation: SourceLocation = #_sourceLocation) {
        server.send(id, audio: speech(1) + silence(1))
        server.send(id, end)
        server.settle()
        #expect(kinds(server.events(id)) == ["ready", "final", "ended"], "\(what)", sourceLocation: sourceLocation)
        #expect(server.connections.closeRequest(id)?.code == 1000, "\(what)", sourceLocation: sourceLocation)
    }

    static func errors(_ events: [JSONObject]) -> [JSONObject] { events.filter { $0.type == "error" } }

    /// The `key` of the last event of `type`.
    static func last(_ type: String, _ key: String, in events: [JSONObject]) -> Double? {
        events.last { $0.type == type }?.number(key)
    }

    static func near(_ a: Double?, _ b: Double) -> Bool { a.map { abs($0 - b) < 0.0015 } ?? false }

    // MARK: - The error table: non-fatal errors

    @Test func badMessagesAreNonFatalBeforeAndAfterStartAndTheSessionGoesOn() throws {
        let server = Self.server()
        let id = try #require(server.connect().1)
        let audio = #""audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}"#
        let beforeStart = [
            "hello",                                                    // not JSON
            "[1,2]",                                                    // not an object
            "",                                                         // empty
            #"{"audio":{}}"#,                                           // no type
            #"{"type":"jump"}"#,                                        // unknown type
            #"{"type":"start"}"#,                                       // start without audio
            #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":"fast","channels":1}}"#,
            #"{"type":"start",\#(audio),"language":"fr-FR"}"#,          // a language the server lacks
            #"{"type":"start",\#(audio),"model":"nosuch"}"#,            // a model the server lacks
            #"{"type":"start",\#(audio),"format":"fancy"}"#,            // no such format
            #"{"type":"start",\#(audio),"alternatives":11}"#,           // over the bound
            #"{"type":"start",\#(audio),"phrases":["a b c d e f g h i j k"]}"#,  // a phrase of 11 words
            #"{"type":"gap","duration":0}"#,                            // malformed, before start
        ]
        var seen = 0
        for message in beforeStart {
            server.send(id, message)
            let events = server.events(id)
            let new = Array(events[seen...])
            seen = events.count
            #expect(new.count == 1 && new[0].type == "error" && new[0].text("code") == "bad_message"
                    && new[0].flag("fatal") == false && new[0].text("message")?.isEmpty == false,
                    "\(message) → \(new.map { "\($0.type) \($0.text("code") ?? "") \($0.text("message") ?? "")" })")
            #expect(server.connections.closeRequest(id) == nil, "\(message) closed the connection")
        }
        // None of them started a session: this start is the first.
        server.send(id, Self.start)
        server.settle()
        let afterStart = [
            #"{"type":"finalize","through":"soon"}"#,                   // mistyped field
            #"{"type":"finalize","through":-1}"#,                       // out of range
            #"{"type":"end""#,                                          // cut short
            "",
            #"{"type":"nope"}"#,
            #"{"type":"gap","duration":4000}"#,                         // over 3600 s
            #"{"type":"silence","duration":-1}"#,
        ]
        seen = server.events(id).count
        for message in afterStart {
            server.send(id, message)
            let events = server.events(id)
            let new = Array(events[seen...])
            seen = events.count
            #expect(new.count == 1 && new[0].type == "error" && new[0].text("code") == "bad_message" && new[0].flag("fatal") == false,
                    "\(message) → \(new.map { "\($0.type) \($0.text("code") ?? "")" })")
        }
        // The session goes on as if nothing had happened.
        server.send(id, audio: Self.speech(2) + Self.silence(1))
        server.settle()
        server.send(id, Self.end)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events) == Array(repeating: "error", count: beforeStart.count) + ["ready"]
                + Array(repeating: "error", count: afterStart.count) + ["final", "ended"])
        #expect(Self.finals(events).map(\.text) == ["w1 w2"])
        #expect(server.connections.closeRequest(id)?.code == 1000)
        Self.expectNumbered(events)
        #expect(server.metrics.errors.labels("bad_message").value == Double(beforeStart.count + afterStart.count))
    }

    @Test func aViewerThatSendsAMessageGetsANonFatalBadMessage() throws {
        let server = Self.server()
        let viewer = try #require(server.connect("/v1/listen?channel=hall").1)
        server.send(viewer, Self.start)
        server.send(viewer, audio: Self.speech(1))
        let events = server.events(viewer)
        #expect(events.map(\.type) == ["joined", "error", "error"])
        #expect(Self.errors(events).allSatisfy { $0.text("code") == "bad_message" && $0.flag("fatal") == false })
        #expect(server.connections.closeRequest(viewer) == nil)
        #expect(server.sessions.count == 0, "a viewer's message started no session")
    }

    /// PCM that is not whole sample frames is dropped (the timeline does not move) with a
    /// non-fatal `bad_audio`: s16 mono has 2-byte frames, f32 mono 4, s16 stereo 4.
    @Test(arguments: [("pcm_s16le", 1, 3), ("pcm_f32le", 1, 6), ("pcm_s16le", 2, 6)])
    func pcmThatIsNotWholeSampleFramesIsDroppedWithBadAudio(_ encoding: String, _ channels: Int, _ torn: Int) throws {
        let server = Self.server()
        let id = try Self.started(server,
            #"{"type":"start","audio":{"encoding":"\#(encoding)","sampleRate":16000,"channels":\#(channels)}}"#)
        let frameBytes = (encoding == "pcm_f32le" ? 4 : 2) * channels
        let good = [UInt8](repeating: 0, count: Self.block * frameBytes)
        server.send(id, audio: good)
        server.send(id, audio: [UInt8](repeating: 0, count: torn))
        server.send(id, audio: good)
        server.send(id, Self.end)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "error", "ended"])
        let error = try #require(Self.errors(events).first)
        #expect(error.text("code") == "bad_audio" && error.flag("fatal") == false)
        #expect(Self.near(Self.last("ended", "duration", in: events), 2 * Self.blockSeconds), "the torn frame was not counted")
        #expect(server.connections.closeRequest(id)?.code == 1000)
    }

    /// An Opus packet the server cannot read the length of (no header: counted as long as the
    /// last good packet, none yet: 20 ms) or one the decoder cannot decode (a header saying
    /// two 20 ms frames, the first longer than the packet) is concealed, with a non-fatal
    /// `bad_audio`, once.
    @Test(arguments: [("no header", [UInt8](), 0.02), ("undecodable", [0x0A, 251, 1, 2, 3], 0.04)])
    func anOpusPacketThatCannotBeDecodedIsConcealedWithBadAudio(_ what: String, _ packet: [UInt8], _ duration: Double) throws {
        let server = Self.server()
        let id = try Self.started(server, #"{"type":"start","audio":{"encoding":"opus","sampleRate":48000,"channels":1}}"#)
        server.send(id, audio: packet)
        server.send(id, Self.end)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "error", "ended"], "\(what): \(Self.kinds(events, all: true))")
        #expect(Self.errors(events).first?.text("code") == "bad_audio" && Self.errors(events).first?.flag("fatal") == false)
        #expect(Self.near(Self.last("ended", "duration", in: events), duration), "\(what)")
        #expect(server.connections.closeRequest(id)?.code == 1000)
    }

    // MARK: - The error table: fatal errors

    @Test(arguments: [
        "audio", #"{"type":"finalize"}"#, #"{"type":"end"}"#, #"{"type":"cancel"}"#,
        #"{"type":"gap","duration":1}"#, #"{"type":"silence","duration":1}"#, "second start", "resume after start",
    ])
    func anythingButStartFirstOrASecondStartCloses4400(_ what: String) throws {
        let server = Self.server()
        let id = try #require(server.connect().1)
        switch what {
        case "audio":
            server.send(id, audio: [0, 0, 0, 0])
        case "second start":
            server.send(id, Self.start)
            server.send(id, Self.start)
        case "resume after start":
            server.send(id, Self.start)
            server.send(id, #"{"type":"resume","session":"abc","resumeToken":"def","after":0}"#)
        default:
            server.send(id, what)
        }
        server.settle()
        Self.expectFatal(server, id, "not_started", close: 4400, what)
        let started = what.hasSuffix("start")
        #expect(Self.kinds(server.events(id)) == (started ? ["ready", "error"] : ["error"]), "\(what)")
        #expect(server.engine.recognizersAlive == 0)
    }

    @Test(arguments: [
        #""encoding":"mp3","sampleRate":16000,"channels":1"#,
        #""encoding":"pcm_s16le","sampleRate":7999,"channels":1"#,
        #""encoding":"pcm_s16le","sampleRate":96000,"channels":1"#,
        #""encoding":"pcm_f32le","sampleRate":16000,"channels":3"#,
        #""encoding":"pcm_s16le","sampleRate":16000,"channels":0"#,
        #""encoding":"opus","sampleRate":44100,"channels":1"#,
    ])
    func unsupportedAudioCloses1003(_ audio: String) throws {
        let server = Self.server()
        let id = try #require(server.connect().1)
        server.send(id, #"{"type":"start","audio":{\#(audio)}}"#)
        server.settle()
        Self.expectFatal(server, id, "unsupported_audio", close: 1003, audio)
        #expect(server.events(id).count == 1)
        #expect(server.engine.recognizersAlive == 0)
    }

    /// Over `maxFrameBytes`: a message the transport stopped assembling (`tooLarge`), or one
    /// delivered whole that is over the limit anyway.
    @Test(arguments: ["transport", "transport before start", "whole binary", "whole text", "whole text before start"])
    func aMessageOverTheFrameLimitCloses1009(_ what: String) throws {
        let limit = 8192
        let server = Self.server { $0.limits.maxFrameBytes = limit }
        let id = try #require(server.connect().1)
        let beforeStart = what.hasSuffix("before start")
        if !beforeStart {
            server.send(id, Self.start)
            server.settle()
        }
        switch what {
        case "whole binary":
            server.send(id, audio: [UInt8](repeating: 0, count: limit + 2))
        case "whole text", "whole text before start":
            server.send(id, #"{"type":"finalize","pad":""# + String(repeating: "x", count: limit) + #""}"#)
        default:
            server.router.tooLarge(id, limit: limit)
        }
        server.settle()
        Self.expectFatal(server, id, "too_large", close: 1009, what)
        #expect(Self.kinds(server.events(id)) == (beforeStart ? ["error"] : ["ready", "error"]), "\(what)")
        #expect(server.engine.recognizersAlive == 0)
        // The next session is not affected.
        Self.expectItWorks(server, try Self.started(server), "the next session")
    }

    @Test func aViewerOverTheFrameLimitIsClosed1009WithoutAnEvent() throws {
        let server = Self.server()
        let viewer = try #require(server.connect("/v1/listen?channel=hall").1)
        server.router.tooLarge(viewer, limit: 8192)
        #expect(server.events(viewer).map(\.type) == ["joined"])
        #expect(server.connections.closeRequest(viewer)?.code == 1009)
    }

    /// `--max-session-seconds` since start (4009) or `--idle-timeout` since the last message
    /// or analysis (4010), reached in the middle of an utterance: its final comes first.
    @Test(arguments: [("session_limit", UInt16(4009)), ("idle", UInt16(4010))])
    func aLimitReachedInASessionFinalizesThenCloses(_ code: String, _ close: UInt16) throws {
        let server = Self.server {
            if code == "idle" { $0.limits.idleTimeoutSeconds = 60 } else { $0.limits.maxSessionSeconds = 60 }
        }
        // Start, audio and analysis all come after this.
        let before = SystemClock.now()
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(4))   // an utterance in progress
        server.settle()
        Self.tick(server, at: before + 59.9)
        server.settle()
        #expect(server.connections.closeRequest(id) == nil, "not yet")
        Self.tick(server, at: SystemClock.now() + 60)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "final", "error"], "the finals come before the error")
        #expect(Self.finals(events).map(\.text) == ["w1 w2 w3 w4"])
        Self.expectFatal(server, id, code, close: close)
        #expect(server.engine.recognizersAlive == 0)
    }

    @Test(arguments: ["idle", "start deadline"])
    func noStartInTimeCloses4010AtOnce(_ which: String) throws {
        let server = Self.server {
            $0.limits.idleTimeoutSeconds = which == "idle" ? 30 : 0
            $0.limits.startTimeoutSeconds = which == "idle" ? 0 : 10
        }
        let before = SystemClock.now()
        let id = try #require(server.connect().1)
        server.send(id, "hello")   // a message is activity, but it is no start
        _ = server.events(id)
        let limit = which == "idle" ? 30.0 : 10.0
        Self.tick(server, at: before + limit - 0.1)
        #expect(server.connections.closeRequest(id) == nil)
        Self.tick(server, at: SystemClock.now() + limit)
        Self.expectFatal(server, id, "idle", close: 4010, which)
        #expect(Self.kinds(server.events(id)) == ["error", "error"])
    }

    /// A client the server holds back (its socket not read) cannot send: analysis moving on
    /// is activity. All the client did was done by `sent`; analysis ran after `analyzing`; a
    /// tick 30 s after `sent` is within 30 s of the analysis.
    @Test func aClientHeldBackWhileAnalysisMovesOnIsNotIdle() throws {
        let server = Self.server {
            $0.limits.idleTimeoutSeconds = 30
            $0.limits.bufferSeconds = 1
        }
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(4) + Self.silence(5))
        #expect(server.connections.readingChanges(id) == [false], "held back")
        let sent = SystemClock.now()
        let analyzing = SystemClock.now()
        #expect(analyzing > sent)
        server.settle()
        #expect(server.connections.readingChanges(id) == [false, true])
        Self.tick(server, at: sent + 30)
        server.settle()
        #expect(server.connections.closeRequest(id) == nil, "idle, though analysis moved on within 30 s")
        // With nothing more from the client or the analysis, it is idle.
        Self.tick(server, at: SystemClock.now() + 30)
        server.settle()
        #expect(Self.kinds(server.events(id)) == ["ready", "final", "error"])
        Self.expectFatal(server, id, "idle", close: 4010)
    }

    @Test func anOutstandingFinalizeIsNotIdle() throws {
        let server = Self.server { $0.limits.idleTimeoutSeconds = 30 }
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(2))
        server.send(id, Self.finalize)
        // The server owes the client its finals: the client is not idle while it waits.
        Self.tick(server, at: SystemClock.now() + 31)
        #expect(server.connections.closeRequest(id) == nil)
        server.settle()
        #expect(Self.kinds(server.events(id)) == ["ready", "final", "finalized"])
        Self.tick(server, at: SystemClock.now() + 30)
        server.settle()
        Self.expectFatal(server, id, "idle", close: 4010)
    }

    @Test(arguments: ["unknown session", "wrong token"])
    func aResumeThatCannotBeGrantedCloses4404(_ what: String) throws {
        let server = Self.server { $0.limits.resumeSeconds = 30 }
        let running = try Self.started(server)
        let ready = try #require(server.events(running).first)
        let session = try #require(ready.text("session"))
        #expect(ready.text("resumeToken")?.isEmpty == false)
        let id = try #require(server.connect("/v1/stream?resume=\(session)").1)
        let named = what == "unknown session" ? "nosuchsession" : session
        server.send(id, #"{"type":"resume","session":"\#(named)","resumeToken":"not-the-token","after":0}"#)
        server.settle()
        Self.expectFatal(server, id, "resume_failed", close: 4404, what)
        #expect(server.events(id).count == 1)
        // The session named is not disturbed.
        #expect(server.connections.closeRequest(running) == nil)
        Self.expectItWorks(server, running, "the session named")
    }

    @Test func aRecognizerThatCannotStartFailsTheSessionWithInternal1011() throws {
        let server = Self.server()
        server.engine.refusesRecognizers.store(true, ordering: .relaxed)
        let id = try Self.started(server)
        Self.expectFatal(server, id, "internal", close: 1011)
        #expect(Self.kinds(server.events(id)) == ["ready", "error"])
        #expect(server.metrics.errors.labels("internal").value == 1)
    }

    // MARK: - finalize, end, cancel

    @Test func finalizeMakesWhatWasReceivedFinalThenSaysFinalizedAndTheSessionGoesOn() throws {
        let server = Self.server()
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(4))   // no pause: the utterance stays open
        server.settle()
        #expect(Self.finals(server.events(id)).isEmpty)
        server.send(id, Self.finalize)
        server.settle()
        var events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "final", "finalized"])
        let first = try #require(Self.finals(events).first)
        #expect(first.text == "w1 w2 w3 w4" && Self.near(first.start, 0) && Self.near(first.end, 0.512), "\(first)")
        #expect(Self.near(Self.last("finalized", "through", in: events), 0.512))
        #expect(server.connections.closeRequest(id) == nil, "finalize does not end the session")

        // Later audio is a new utterance.
        server.send(id, audio: Self.speech(2) + Self.silence(1))
        server.settle()
        server.send(id, Self.end)
        server.settle()
        events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "final", "finalized", "final", "ended"])
        let second = Self.finals(events)[1]
        #expect(second.text == "w1 w2" && Self.near(second.start, 0.512) && Self.near(second.end, 0.768), "\(second)")
        #expect(Self.near(Self.last("ended", "duration", in: events), 0.896))
        #expect(server.connections.closeRequest(id).map { "\($0.code) \($0.reason)" } == "1000 ended")
        Self.expectNumbered(events)
    }

    @Test func finalizeThroughAnEarlierTimeCutsThereAndHearsTheRestAgain() throws {
        let server = Self.server()
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(4))
        server.settle()
        server.send(id, #"{"type":"finalize","through":0.256}"#)
        server.settle()
        var events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "final", "finalized"])
        let cut = try #require(Self.finals(events).first)
        #expect(cut.text == "w1 w2" && Self.near(cut.end, 0.256), "the words before the cut: \(cut)")
        #expect(Self.near(Self.last("finalized", "through", in: events), 0.256))
        // What follows the cut is heard again, and stays volatile.
        let volatile = try #require(events.last { $0.type == "volatile" })
        #expect(volatile.text("text") == "w1 w2" && (volatile.number("start") ?? -1) >= 0.256 - 0.0015, "\(volatile)")

        server.send(id, Self.end)
        server.settle()
        events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "final", "finalized", "final", "ended"])
        let rest = Self.finals(events)[1]
        #expect(rest.text == "w1 w2" && rest.start >= 0.256 - 0.0015 && Self.near(rest.end, 0.512), "\(rest)")
        #expect(Self.near(Self.last("ended", "duration", in: events), 0.512))
    }

    @Test func finalizeThroughALaterTimeStopsAtWhatWasReceived() throws {
        let server = Self.server()
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(2))
        server.send(id, #"{"type":"finalize","through":5}"#)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "final", "finalized"])
        #expect(Self.near(Self.last("finalized", "through", in: events), 0.256))
    }

    @Test func finalizesCompleteInTheOrderTheyWereSent() throws {
        let server = Self.server()
        let id = try Self.started(server)
        // Nothing runs until both are in.
        server.send(id, audio: Self.speech(2))
        server.send(id, Self.finalize)
        server.send(id, audio: Self.speech(2))
        server.send(id, Self.finalize)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "final", "finalized", "final", "finalized"])
        #expect(events.filter { $0.type == "finalized" }.compactMap { $0.number("through") } == [0.256, 0.512])
        let finals = Self.finals(events)
        #expect(finals.count == 2 && Self.near(finals[0].end, 0.256) && Self.near(finals[1].start, 0.256))
    }

    @Test func endDeliversTheLastFinalsThenEndedThenCloses1000() throws {
        let server = Self.server()
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(3) + Self.silence(1))   // an utterance and a pause
        server.send(id, audio: Self.speech(2))                     // and one still open
        server.send(id, Self.end)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "final", "final", "ended"])
        #expect(Self.finals(events).map(\.text) == ["w1 w2 w3", "w1 w2"])
        #expect(Self.near(Self.last("ended", "duration", in: events), 0.768))
        #expect(events.last?.type == "ended", "nothing after ended: \(Self.kinds(events, all: true))")
        #expect(server.connections.closeRequest(id).map { "\($0.code) \($0.reason)" } == "1000 ended")
        Self.expectNumbered(events)
        #expect(server.engine.recognizersAlive == 0)
        #expect(server.engine.load.busy == 0)
        // The transport reports the close: the session is forgotten.
        server.disconnect(id)
        server.settle()
        #expect(server.sessions.count == 0)
        #expect(server.metrics.sessionsActive.value == 0)
    }

    @Test func messagesWhileEndingAreRefusedWithoutHarm() throws {
        let server = Self.server()
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(2))
        server.send(id, Self.end)
        // Audio after end (one warning, however many frames), a second end, a finalize, a gap,
        // and silence (audio after end too: already warned about).
        for _ in 0..<3 { server.send(id, audio: Self.speech(1)) }
        server.send(id, Self.end)
        server.send(id, Self.finalize)
        server.send(id, #"{"type":"gap","duration":1}"#)
        server.send(id, #"{"type":"silence","duration":1}"#)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "error", "error", "error", "error", "final", "ended"])
        #expect(Self.errors(events).allSatisfy { $0.text("code") == "bad_message" && $0.flag("fatal") == false })
        #expect(Self.finals(events).map(\.text) == ["w1 w2"])
        #expect(Self.near(Self.last("ended", "duration", in: events), 0.256), "audio after end is not counted")
        #expect(server.connections.closeRequest(id)?.code == 1000)
    }

    @Test func cancelSendsOnlyCancelledThroughWhatWasAnalyzedThenCloses1000() throws {
        let server = Self.server()
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(4))
        server.settle()   // analyzed: 0.512 s, an utterance open
        server.send(id, audio: Self.speech(4))   // received, not analyzed
        let before = server.events(id).count
        server.send(id, Self.cancel)
        server.settle()
        let events = server.events(id)
        #expect(events[before...].map(\.type) == ["cancelled"], "\(Self.kinds(events, all: true))")
        #expect(Self.near(Self.last("cancelled", "through", in: events), 0.512))
        #expect(Self.finals(events).isEmpty, "the open utterance is discarded, not finalized")
        #expect(server.connections.closeRequest(id).map { "\($0.code) \($0.reason)" } == "1000 cancelled")
        #expect(server.engine.recognizersAlive == 0)
        #expect(server.engine.load.busy == 0, "the decoder went back")
        Self.expectNumbered(events)
    }

    @Test(arguments: ["right after start", "while ending"])
    func cancelIsHonoured(_ when: String) throws {
        let server = Self.server()
        let id = try Self.started(server, settled: false)
        if when == "while ending" {
            server.settle()
            server.send(id, audio: Self.speech(4))
            server.send(id, Self.end)
        }
        server.send(id, Self.cancel)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events, all: true) == ["ready", "cancelled"], "\(when)")
        #expect(Self.near(Self.last("cancelled", "through", in: events), 0))
        #expect(server.connections.closeRequest(id)?.code == 1000)
        #expect(server.engine.recognizersAlive == 0)
    }

    /// `gap` (audio the client lost) and `silence` (silence it did not send) move the timeline
    /// without audio and end the utterance in progress there; only `gap` is answered.
    @Test(arguments: ["gap", "silence"])
    func aGapOrSilenceEndsTheUtteranceAndMovesTheTimeline(_ type: String) throws {
        let server = Self.server()
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(2))
        server.settle()
        server.send(id, #"{"type":"\#(type)","duration":1}"#)
        server.settle()
        server.send(id, audio: Self.speech(2))
        server.send(id, Self.end)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events) == (type == "gap" ? ["ready", "gap", "final", "final", "ended"] : ["ready", "final", "final", "ended"]))
        if type == "gap", let gap = events.first(where: { $0.type == "gap" }) {
            #expect(Self.near(gap.number("start"), 0.256) && Self.near(gap.number("end"), 1.256), "\(gap)")
        }
        let finals = Self.finals(events)
        #expect(finals.count == 2)
        #expect(finals.first.map { $0.text == "w1 w2" && Self.near($0.end, 0.256) } == true, "ends at the hole: \(finals)")
        #expect(finals.last.map { $0.text == "w1 w2" && Self.near($0.start, 1.256) && Self.near($0.end, 1.512) } == true,
                "after the hole: \(finals)")
        #expect(Self.near(Self.last("ended", "duration", in: events), 1.512))
    }

    // MARK: - Inbound backpressure

    /// At `bufferSeconds` of audio waiting for analysis the socket stops being read; it is read
    /// again only once analysis has brought the backlog down to half, and no audio is lost.
    @Test func readingPausesAtTheBufferMarkAndResumesAtHalfWithNoAudioLost() throws {
        let server = Self.server(recognizers: 1) { $0.limits.bufferSeconds = 2 }
        // A holds the one recognizer: an utterance in progress.
        let a = try Self.started(server)
        server.send(a, audio: Self.speech(4))
        server.settle()
        #expect(server.engine.load.busy == 1)
        let b = try Self.started(server)

        // B: 0.768 s of silence, then speech, unanalyzed (nothing runs).
        server.send(b, audio: Self.silence(6))
        server.send(b, audio: Self.speech(9))   // 1.92 s waiting: under the mark
        #expect(server.connections.readingChanges(b).isEmpty)
        server.send(b, audio: Self.speech(1))   // 2.048 s: at the mark
        #expect(server.connections.readingChanges(b) == [false])
        // What still arrives while paused (already in the socket's buffers) is taken.
        server.send(b, audio: Self.speech(1))
        #expect(server.connections.readingChanges(b) == [false], "said once")

        // B's silence is analyzed, then its speech waits for A's recognizer: 1.408 s left,
        // under the mark but over half of it, so reading stays paused.
        server.settle()
        #expect(server.engine.load.waiting == 1)
        #expect(server.sessions[b].map { abs($0.bufferedSeconds - 1.408) < 0.002 } == true,
                "\(server.sessions[b]?.bufferedSeconds ?? -1)")
        #expect(server.connections.readingChanges(b) == [false])

        // A pauses: the recognizer goes to B, which catches up and is read again.
        server.send(a, audio: Self.silence(1))
        server.settle()
        #expect(server.connections.readingChanges(b) == [false, true])
        #expect(server.connections.isReading(b))
        #expect(server.connections.readingChanges(a).isEmpty, "A was never held back")

        server.send(b, Self.end)
        server.settle()
        let events = server.events(b)
        #expect(Self.kinds(events) == ["ready", "final", "ended"])
        #expect(Self.finals(events).first?.text == (1...11).map { "w\($0)" }.joined(separator: " "), "every block was heard")
        #expect(Self.near(Self.last("ended", "duration", in: events), 17 * Self.blockSeconds))
    }

    @Test func aSessionThatFallsBehindAgainPausesAgainAtTheMark() throws {
        let server = Self.server { $0.limits.bufferSeconds = 1 }
        let id = try Self.started(server)
        for round in 1...3 {
            // 0.896 s waiting: under the mark; 1.024 s: at it.
            server.send(id, audio: Self.silence(7))
            #expect(server.connections.readingChanges(id).count == 2 * (round - 1))
            server.send(id, audio: Self.silence(1))
            #expect(server.connections.readingChanges(id).last == false)
            server.settle()
            #expect(server.connections.readingChanges(id) == Array([[Bool]](repeating: [false, true], count: round).joined()), "round \(round)")
        }
    }

    // MARK: - Outbound backpressure

    /// Unsent volatile and progress events are replaced by newer ones; finals are never dropped,
    /// and the client reads no gap in `seq`.
    @Test func aClientThatReadsLateGetsTheLatestVolatileAndEveryFinal() throws {
        let server = Self.server()
        let id = try Self.started(server)
        _ = server.events(id)
        // Three utterances of 6 blocks, without the client reading.
        for _ in 0..<3 {
            for _ in 0..<6 {
                server.send(id, audio: Self.speech(1))
                server.settle()
            }
            server.send(id, audio: Self.silence(1))
            server.settle()
        }
        for _ in 0..<5 {
            server.send(id, audio: Self.speech(1))
            server.settle()
        }
        let events = server.events(id)
        #expect(Self.finals(events).map(\.text) == Array(repeating: "w1 w2 w3 w4 w5 w6", count: 3))
        let volatiles = events.filter { $0.type == "volatile" }
        #expect(volatiles.map { $0.text("text") } == ["w1 w2 w3 w4 w5"], "only the latest unsent volatile is left")
        #expect(events.filter { $0.type == "progress" }.count <= 1)
        #expect(Self.kinds(events, all: true).filter { $0 != "progress" }
                == ["ready"] + Array(repeating: ["speech", "final", "speech"], count: 3).joined() + ["speech", "volatile"])
        Self.expectNumbered(events)
    }

    /// A client that reads nothing: its queue stays within `outboundBytes`, and the first
    /// must-deliver event that does not fit closes it with 4008 at once, its queue discarded.
    /// Another session on the same server is not affected.
    @Test func aClientThatDoesNotReadIsClosedWith4008AtTheQueueBoundAndOthersGoOn() throws {
        let limit = 4096
        let server = Self.server { $0.limits.outboundBytes = limit }
        let slow = try Self.started(server)
        let other = try Self.started(server)
        var sent = 0
        var most = 0
        while server.connections.closeRequest(slow) == nil && sent < 1000 {
            // Every finalize is answered by a must-deliver `finalized`.
            server.send(slow, Self.finalize)
            server.send(other, audio: Self.speech(1) + Self.silence(1))
            server.settle()
            server.connections.read(other)
            sent += 1
            most = max(most, server.connections.queuedBytes(slow) ?? 0)
        }
        let close = try #require(server.connections.closeRequest(slow))
        #expect(close.code == 4008 && close.reason == "slow_consumer")
        #expect(most <= limit && most > limit / 2, "the queue held \(most) bytes at most")
        #expect(sent > 10 && sent < 200, "closed after \(sent) finalizes")
        #expect(server.connections.read(slow).count == 0, "what was queued is discarded")
        #expect(server.metrics.errors.labels("slow_consumer").value == 1)
        #expect(server.sessions[slow]?.isClosed == true)
        #expect(server.engine.recognizersAlive == 1, "only the other session's recognizer is left")

        // The other session had all its finals and ends normally.
        server.send(other, Self.end)
        server.settle()
        let events = server.events(other)
        #expect(Self.finals(events).count == sent)
        #expect(Self.kinds(events).last == "ended")
        #expect(server.connections.closeRequest(other)?.code == 1000)
        Self.expectNumbered(events)
    }

    @Test func aViewerThatDoesNotReadIsClosedWith4008AndThePublisherGoesOn() throws {
        let server = Self.server { $0.limits.outboundBytes = 2048 }
        let viewer = try #require(server.connect("/v1/listen?channel=hall").1)
        let reader = try #require(server.connect("/v1/listen?channel=hall").1)
        let publisher = try Self.started(server, ChannelLifecycleTests.start(channel: "hall"))
        var utterances = 0
        while server.connections.closeRequest(viewer) == nil && utterances < 200 {
            server.send(publisher, audio: Self.speech(2) + Self.silence(1))
            server.settle()
            server.connections.read(publisher)
            server.connections.read(reader)
            utterances += 1
        }
        #expect(server.connections.closeRequest(viewer).map { "\($0.code) \($0.reason)" } == "4008 slow_consumer")
        #expect(utterances > 3, "closed after \(utterances) utterances")
        #expect(server.connections.closeRequest(publisher) == nil)
        #expect(server.connections.closeRequest(reader) == nil)
        server.send(publisher, Self.end)
        server.settle()
        #expect(Self.finals(server.events(publisher)).count == utterances)
        #expect(Self.finals(server.events(reader)).count == utterances, "the viewer that reads got every final")
    }

    // MARK: - Drain

    /// Shutdown: a session that never started closes at once; a streaming one gets its last
    /// finals, then `shutting_down` and 1001 (its channel's viewers get those finals too); one
    /// already ending on the client's `end` ends normally. Newcomers are refused.
    @Test func theDrainDeliversEachSessionsLastFinalsThenClosesIt1001AndRefusesNewcomers() throws {
        let server = Self.server()
        let viewer = try #require(server.connect("/v1/listen?channel=hall").1)
        let streaming = try Self.started(server, ChannelLifecycleTests.start(channel: "hall"))
        server.send(streaming, audio: Self.speech(3) + Self.silence(1))
        server.send(streaming, audio: Self.speech(4))   // an utterance in progress
        server.settle()
        let waiting = try #require(server.connect().1)   // never started
        let ending = try Self.started(server)
        server.send(ending, audio: Self.speech(2))
        server.send(ending, Self.end)                    // ending, its finals not made yet

        server.router.startDraining()
        Self.expectFatal(server, waiting, "shutting_down", close: 1001, "a session that never started")
        #expect(server.connections.closeRequest(streaming) == nil, "the finals come first")
        server.settle()

        let events = server.events(streaming)
        #expect(Self.kinds(events) == ["ready", "final", "final", "error"])
        #expect(Self.finals(events).map(\.text) == ["w1 w2 w3", "w1 w2 w3 w4"])
        Self.expectFatal(server, streaming, "shutting_down", close: 1001)
        let ended = server.events(ending)
        #expect(Self.kinds(ended) == ["ready", "final", "ended"])
        #expect(server.connections.closeRequest(ending).map { "\($0.code) \($0.reason)" } == "1000 ended")
        // What `StenoServer.drain` waits for: no live session left.
        #expect(server.sessions.liveCount == 0)
        #expect(server.engine.recognizersAlive == 0)
        // The channel's viewer got the finals the drain produced (it is closed by the server
        // once the sessions are done, not by the router).
        #expect(Self.finals(server.events(viewer)).map(\.text) == ["w1 w2 w3", "w1 w2 w3 w4"])

        // Newcomers are refused, resumes too, and every probe says why.
        for path in ["/v1/stream", "/v1/stream?resume=abc", "/v1/listen?channel=hall"] {
            guard case .reject(let response) = server.connect(path).0 else {
                Issue.record("\(path) was accepted while draining")
                continue
            }
            #expect(response.status == 503, "\(path)")
            #expect(String(decoding: response.body, as: UTF8.self).contains(#""status":"draining""#), "\(path)")
            #expect(response.headers.contains { $0.name == "Retry-After" })
        }
        #expect(server.metrics.handshakesRefused.labels("draining").value == 3)
        #expect(server.metrics.handshakesRefused.labels("capacity").value == 0)
        for path in ["/healthz", "/readyz", "/v1/stream"] {
            let response = ChannelLifecycleTests.get(server, path)
            #expect(response.status == 503, "\(path)")
            #expect(String(decoding: response.body, as: UTF8.self).contains(#""status":"draining""#), "\(path)")
        }
    }

    @Test func aSessionStillFinalizingAtTheDrainDeadlineIsClosedAtOnce() throws {
        let server = Self.server()
        let id = try Self.started(server)
        server.send(id, audio: Self.speech(4))
        server.settle()
        server.router.startDraining()
        // Its finals are not made (the lanes have not run) when the deadline comes.
        for session in server.sessions.all { session.input(.shutdownDeadline) }
        Self.expectFatal(server, id, "shutting_down", close: 1001)
        server.settle()
        let events = server.events(id)
        #expect(Self.kinds(events) == ["ready", "error"], "nothing after the close")
        #expect(server.sessions.liveCount == 0)
        #expect(server.engine.recognizersAlive == 0)
    }

    @Test func aConnectionAcceptedBeforeTheDrainThatOpensDuringItIsClosedAtOnce() throws {
        let server = Self.server()
        let request = UpgradeRequest(path: "/v1/stream")
        #expect(server.router.decideUpgrade(request) == .accept)
        server.router.startDraining()
        let id = ConnectionID(rawValue: 1_000_000)
        server.connections.open(id)
        server.router.opened(id, request: request)
        Self.expectFatal(server, id, "shutting_down", close: 1001)
        #expect(server.events(id).count == 1)
    }
}

extension JSONObject {
    fileprivate func text(_ key: String) -> String? { if case .string(let s)? = self[key] { s } else { nil } }
    fileprivate func flag(_ key: String) -> Bool? { if case .bool(let b)? = self[key] { b } else { nil } }
}
