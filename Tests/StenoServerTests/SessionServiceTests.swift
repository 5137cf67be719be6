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
/// Covered: every row of docs/protocol.md's error table that the service produces (here), finalize /
/// end / cancel, inbound and outbound backpressure, and the drain (SessionServiceFlowTests.swift). Left to the live tests:
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
}


extension JSONObject {
    func text(_ key: String) -> String? { if case .string(let s)? = self[key] { s } else { nil } }
    func flag(_ key: String) -> Bool? { if case .bool(let b)? = self[key] { b } else { nil } }
}
