import Foundation
import StenoCore
import StenoSpeech
import StenoTransport
import StenoSystem
import Testing
@testable import StenoServer

/// Sharing recognizers among sessions, in memory: more talkers than recognizers, thousands of
/// quiet sessions, and admission by measured load. The scripted engine lends its "decoders"
/// as pocketsphinx's pool does, so this is the server's scheduling without models or sockets.
@Suite struct SchedulingTests {
    /// Talkers in turns of 1 s of speech and 0.5 s of pause, for 30 s of audio, all at once.
    static func talk(_ server: MemoryServer, _ ids: [ConnectionID], seconds: Double, onRound: (Int) -> Void = { _ in }) {
        let block = 0.128
        let speech = MemoryServer.pcm(seconds: block, speech: true)
        let silence = MemoryServer.pcm(seconds: block, speech: false)
        let rounds = Int(seconds / block)
        for round in 0..<rounds {
            let t = Double(round) * block
            for id in ids {
                server.send(id, audio: t.truncatingRemainder(dividingBy: 1.5) < 1.0 ? speech : silence)
            }
            server.settle()
            for id in ids { server.connections.read(id) }
            onRound(round)
        }
    }

    @Test func moreTalkersThanRecognizersShareThemFairlyAndNoneStarves() throws {
        let server = MemoryServer(recognizers: 3) { $0.limits.bufferSeconds = 3600 }
        var ids: [ConnectionID] = []
        for _ in 0..<12 {
            let (_, id) = server.connect()
            ids.append(try #require(id))
            server.send(ids.last!, MemoryServer.start)
        }
        server.settle()
        var spreads: [Double] = []
        var mostWaiting = 0
        Self.talk(server, ids, seconds: 30) { round in
            mostWaiting = max(mostWaiting, server.engine.load.waiting)
            guard round % 20 == 19 else { return }
            let analyzed = ids.map { id in
                server.events(id).last { $0.type == "progress" }?.number("analyzed") ?? 0
            }
            spreads.append(analyzed.max()! - analyzed.min()!)
        }
        #expect(server.engine.load.busy <= 3)
        #expect(mostWaiting >= 3, "the talkers had to queue for recognizers")
        for id in ids { server.send(id, #"{"type":"end"}"#) }
        for _ in 0..<200 where ids.contains(where: { server.connections.closeRequest($0) == nil }) { server.settle() }

        // Every talker got every utterance of its 30 s, in order; nobody starved.
        for id in ids {
            let events = server.events(id)
            let finals = events.filter { $0.type == "final" }
            #expect(finals.count == 20, "\(id): \(finals.count) finals")
            let starts = finals.compactMap { $0.number("start") }
            #expect(starts == starts.sorted())
            #expect(events.last?.type == "ended")
        }
        // While they queued for recognizers, they fell behind evenly: no session got more
        // than one utterance's turn (1.5 s of audio) ahead of another.
        #expect(!spreads.isEmpty)
        #expect(spreads.allSatisfy { $0 <= 1.5 + 0.3 }, "spreads of analyzed audio: \(spreads)")
        #expect(server.engine.load.busy == 0 && server.engine.load.waiting == 0)
    }

    @Test func newSessionsAreRefusedWhileTalkersWaitForRecognizersAndAdmittedAfter() throws {
        let server = MemoryServer(recognizers: 2)
        server.router.admission.waitGrace = 0
        var ids: [ConnectionID] = []
        for _ in 0..<4 {
            let (_, id) = server.connect()
            ids.append(try #require(id))
            server.send(ids.last!, MemoryServer.start)
        }
        server.settle()
        // Four talkers, two recognizers: two wait.
        for id in ids { server.send(id, audio: MemoryServer.pcm(seconds: 0.5, speech: true)) }
        server.settle()
        #expect(server.engine.load.waiting == 2)
        server.settle()
        guard server.expectBusyRefusal("admitted while talkers wait") else { return }
        // A viewer is not a talker.
        #expect(server.connect("/v1/listen?channel=x").0 == .accept)
        // A client coming back for its running session adds no talker: let through. One naming
        // a session that is not here is a new session, and refused like one.
        let ready = try #require(server.events(ids[0]).first { $0.type == "ready" })
        guard case .string(let session)? = ready["session"] else {
            Issue.record("ready has no session")
            return
        }
        #expect(server.connect("/v1/stream?resume=\(session)").0 == .accept)
        guard case .reject = server.connect("/v1/stream?resume=nosuchsession").0 else {
            Issue.record("a resume of an unknown session was admitted while busy")
            return
        }

        // Pauses end the utterances; the waiting ones get their turn; nobody waits any more.
        for _ in 0..<3 {
            for id in ids { server.send(id, audio: MemoryServer.pcm(seconds: 0.5, speech: false)) }
            server.settle()
        }
        #expect(server.engine.load.waiting == 0)
        server.settle()
        #expect(server.connect().0 == .accept)
        #expect(server.metrics.admissionBusy.value == 0)
    }

    /// A recognizer's deinit can wait for pocketsphinx's lifecycle lock (held for a second or
    /// more while a decoder is made): it must run on the session's lane, never where the
    /// connection's last reference goes (the lws thread).
    @Test(arguments: [#"{"type":"end"}"#, #"{"type":"cancel"}"#, "not json"])
    func aClosedSessionsRecognizerIsFreedOnItsLaneBeforeItsConnectionGoes(_ last: String) throws {
        let server = MemoryServer()
        let (_, a) = server.connect()
        let id = try #require(a)
        server.send(id, MemoryServer.start)
        server.send(id, audio: MemoryServer.pcm(seconds: 0.5, speech: true))
        server.settle()
        #expect(server.engine.recognizersAlive == 1)
        server.send(id, last)
        if last == "not json" {
            // Not fatal: the session goes on; a second start is fatal (4400).
            server.send(id, MemoryServer.start)
        }
        server.settle()
        #expect(server.connections.closeRequest(id) != nil, "\(server.events(id).map(\.type))")
        #expect(server.engine.recognizersAlive == 0, "the recognizer outlived its session on the lane")
        server.disconnect(id)
    }

    @Test func aTalkerWhoseAudioStopsMidSpeechGivesItsRecognizerBack() throws {
        let server = MemoryServer(recognizers: 1) { $0.limits.stallSeconds = 0.2 }
        let (_, a) = server.connect()
        let (_, b) = server.connect()
        let stalled = try #require(a), next = try #require(b)
        for id in [stalled, next] { server.send(id, MemoryServer.start) }
        server.settle()
        // A speaks and its audio stops (its connection dropped, it stalled) in mid-speech;
        // B speaks and waits for the one recognizer.
        server.send(stalled, audio: MemoryServer.pcm(seconds: 0.5, speech: true))
        server.settle()
        server.send(next, audio: MemoryServer.pcm(seconds: 0.5, speech: true))
        server.settle()
        #expect(server.engine.load.busy == 1 && server.engine.load.waiting == 1)
        #expect(!server.events(stalled).contains { $0.type == "final" })

        // Past the stall: what A said is final, and B has the recognizer.
        Thread.sleep(forTimeInterval: 0.3)
        server.settle()
        server.settle()
        #expect(server.events(stalled).contains { $0.type == "final" })
        #expect(server.engine.load.waiting == 0)
        #expect(server.events(next).contains { $0.type == "volatile" })
        #expect(server.metrics.stalledUtterances.value >= 1)

        // Audio that comes later starts a new utterance of A's, in line for the recognizer.
        server.send(stalled, audio: MemoryServer.pcm(seconds: 0.5, speech: true))
        server.settle()
        server.send(next, audio: MemoryServer.pcm(seconds: 0.5, speech: false))
        server.send(stalled, audio: MemoryServer.pcm(seconds: 0.5, speech: false))
        server.settle()
        server.settle()
        #expect(server.events(stalled).filter { $0.type == "final" }.count == 2)
        #expect(server.events(next).filter { $0.type == "final" }.count >= 1)
    }

    /// A session that has asked to end is finishing its utterance: the stall does not also
    /// finalize it (a job after `finish`, which a real recognizer refuses, logged as an error).
    @Test func anEndingSessionIsNotTakenForStalled() throws {
        let server = MemoryServer(recognizers: 1) { $0.limits.stallSeconds = 0.2 }
        /// The lane jobs left after a session has spoken, asked to end, and been ticked `later`
        /// seconds on (before its finish has run).
        func jobsAfterEnd(tickedAfter later: Double) throws -> (Int, ConnectionID) {
            let id = try #require(server.connect().1)
            server.send(id, MemoryServer.start)
            server.send(id, audio: MemoryServer.pcm(seconds: 0.5, speech: true))
            server.settle()
            server.send(id, #"{"type":"end"}"#)   // its finish waits on the lane
            let session = try #require(server.sessions.all.first { $0.connection == id })
            _ = session.visit(now: SystemClock.now() + later)
            return (server.pool.runPending(), id)
        }
        let (now, first) = try jobsAfterEnd(tickedAfter: 0)
        let (past, second) = try jobsAfterEnd(tickedAfter: 10)
        #expect(past == now, "past the stall, ending is not stalled: no finalize after the finish")
        server.settle()
        for id in [first, second] {
            #expect(server.events(id).map(\.type).filter { $0 == "final" || $0 == "ended" || $0 == "error" } == ["final", "ended"])
        }
    }

    @Test func thousandsOfQuietSessionsHoldNoRecognizerAndLeaveRoomForTalkers() throws {
        let server = MemoryServer(recognizers: 2)
        var quiet: [ConnectionID] = []
        for _ in 0..<2000 {
            let (decision, id) = server.connect()
            #expect(decision == .accept)
            quiet.append(try #require(id))
            server.send(quiet.last!, MemoryServer.start)
        }
        server.settle()
        // A second of silence from every one of them.
        let silence = MemoryServer.pcm(seconds: 1, speech: false)
        for id in quiet { server.send(id, audio: silence) }
        server.settle()
        #expect(server.engine.load.busy == 0 && server.engine.load.waiting == 0)
        // A talker is admitted and captioned.
        let (decision, talkerID) = server.connect()
        #expect(decision == .accept)
        let talker = try #require(talkerID)
        server.send(talker, MemoryServer.start)
        server.send(talker, audio: MemoryServer.pcm(seconds: 0.5, speech: true) + MemoryServer.pcm(seconds: 0.3, speech: false))
        server.send(talker, #"{"type":"end"}"#)
        server.settle()
        let finals = server.events(talker).filter { $0.type == "final" }
        #expect(finals.count == 1)
        #expect(server.sessions.count == 2001)
    }

    @Test func theLiveCountFollowsSessionsAsTheyStartAndClose() throws {
        let server = MemoryServer(recognizers: 2)
        /// What the registry keeps, against counting the sessions one by one.
        func live() -> (kept: Int, counted: Int) {
            (server.sessions.liveCount, server.sessions.all.filter { !$0.isClosed }.count)
        }
        var ids: [ConnectionID] = []
        for _ in 0..<6 {
            ids.append(try #require(server.connect().1))
            server.send(ids.last!, MemoryServer.start)
        }
        let idle = try #require(server.connect().1)  // connected, never starts
        server.settle()
        #expect(live() == (7, 7))
        server.send(ids[0], #"{"type":"end"}"#)
        server.send(ids[1], #"{"type":"cancel"}"#)
        server.send(ids[2], #"{"type":"start"}"#)  // malformed: not fatal, still live
        server.send(ids[3], audio: [1, 2, 3])  // half a sample frame: not fatal either
        server.settle()
        #expect(live() == (5, 5))
        server.disconnect(ids[4])
        server.disconnect(idle)
        server.settle()
        #expect(live() == (3, 3))
        // Ended sessions leave the registry once their connection has gone; the count does
        // not change again.
        for id in ids.prefix(2) { server.disconnect(id) }
        server.settle()
        #expect(live() == (3, 3))
        #expect(server.sessions.count == 3)
    }

    /// The backstop of admission (its prediction of demand off: AdmissionTests).
    @Test func theLoadMeasureHasHysteresis() {
        var admission = Admission<Int>()
        admission.utilizationTarget = 0
        let calm = RecognizerLoad(capacity: 4, busy: 4, waiting: 0)
        admission.measure(now: 0, load: calm, lags: [0, 0.1, 0.5, 0.9])
        #expect(!admission.isBusy, "behind, but within the target")
        admission.measure(now: 1, load: calm, lags: Array(repeating: 1.2, count: 20))
        #expect(admission.isBusy)
        admission.measure(now: 2, load: calm, lags: Array(repeating: 0.7, count: 20))
        #expect(admission.isBusy, "not yet: over half the target")
        admission.measure(now: 3, load: calm, lags: Array(repeating: 0.4, count: 20))
        #expect(!admission.isBusy)
        // Sessions waiting for a recognizer: busy once they have waited the grace period.
        let short = RecognizerLoad(capacity: 4, busy: 4, waiting: 1)
        admission.measure(now: 4, load: short, lags: [])
        #expect(!admission.isBusy)
        admission.measure(now: 5, load: short, lags: [])
        #expect(admission.isBusy && admission.reason == .recognizers)
        admission.measure(now: 6, load: calm, lags: [])
        #expect(!admission.isBusy)
        // Quiet sessions (no backlog) do not dilute the lag of the ones behind.
        admission.measure(now: 7, load: calm, lags: Array(repeating: 0, count: 1000) + Array(repeating: 2, count: 5))
        #expect(admission.isBusy)
    }
}
