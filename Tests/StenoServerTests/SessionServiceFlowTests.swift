import Foundation
import StenoCore
import StenoSystem
import StenoTransport
import Testing
@testable import StenoServer

/// SessionServiceTests (its helpers and the error table are in SessionServiceTests.swift): finalize,
/// end and cancel, inbound and outbound backpressure, and the drain.
extension SessionServiceTests {
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
        #expect(LiveServer.parseMetrics(server.metrics.registry.exposition())["steno_sessions_active"] == 0)
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
