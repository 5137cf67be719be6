import StenoCore
import StenoSession
import StenoSpeech
import StenoSystem
import StenoTransport
import Testing
@testable import StenoServer

/// A `finalize` through an earlier time that meets decoder contention, on the real session
/// layer (Router, StreamSession, lanes parked and unparked) with the real recognizer, one
/// decoder shared by two sessions, and the lanes run when the test says: the cut's finals must
/// be those of `LocalSession` alone, whichever session the decoder goes to meanwhile.
@Suite(.serialized) struct ContendedFinalizeTests {
    /// One decoder, for the two sessions and then the reference.
    static let engine: PocketSphinxEngine = {
        do throws(StenoError) {
            return try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 1))
        } catch {
            fatalError("the pocketsphinx model cannot be loaded: \(error.message)")
        }
    }()

    /// Session A streams Beckett and, at 6.2 s, asks to finalize through 5.5 s (in the
    /// utterance "try again <pause> fail again"); session B streams Beckett `lag` messages
    /// behind, so that its first speech asks for the decoder while A's utterance holds it. B is
    /// granted it when A's cut ends that utterance, and A's re-recognition of what follows the
    /// cut waits for B's utterance to end.
    @Test func aFinalizeThroughAnEarlierTimeWhoseRestWaitsForTheDecoderGivesTheFinalsOfOneAlone() throws {
        let input = TestInput.pcm16k()
        let (before, _, _) = input.split(at: 6.2)
        let finalize = #"{"type":"finalize","through":5.5}"#
        let server = MemoryServer(speech: Self.engine) { $0.limits.bufferSeconds = 3600 }
        let a = try #require(server.connect().1)
        let b = try #require(server.connect().1)
        server.send(a, input.startMessage)
        server.send(b, input.startMessage)
        server.settle()
        let lag = 52
        var finalizeMetWaiting = false
        for round in 0...(input.messages.count + lag) {
            let (ai, bi) = (round, round - lag)
            if ai == before.count { server.send(a, finalize) }
            if ai < input.messages.count { server.send(a, audio: input.messages[ai]) }
            if ai == input.messages.count { server.send(a, #"{"type":"end"}"#) }
            if bi >= 0 && bi < input.messages.count { server.send(b, audio: input.messages[bi]) }
            if bi == input.messages.count { server.send(b, #"{"type":"end"}"#) }
            server.settle()
            if ai == before.count {
                // B holds the decoder; A waits with its finalize not yet complete.
                let finalized = server.events(a).contains { $0.type == "finalized" }
                finalizeMetWaiting = Self.engine.load.waiting == 1 && !finalized
            }
        }
        server.settle()
        #expect(finalizeMetWaiting, "the finalize did not meet contention: the test no longer tests it")
        let finals = Self.finals(server, a)
        let reference = Self.reference(input, finalizeAt: before.count, finalize)
        #expect(finals == reference)
        #expect(Self.finals(server, b) == Self.reference(input))
    }

    /// As above, and A's client waits for `finalized` before it sends more, as a client may:
    /// longer than the stall limit, while B keeps talking. A finalize is outstanding, and
    /// waits for the decoder, so A is not a stalled talker: the tick must not finalize the
    /// utterance A's cut began (it did, at the end of the audio received: "family and"
    /// ended at 7.34 instead of 7.33 and the next final started at 8.022 instead of 8.09,
    /// the difference the live test met under load).
    @Test func aClientWaitingForItsFinalizeLongerThanTheStallLimitIsNotTakenForStalled() throws {
        let input = TestInput.pcm16k()
        let (before, _, _) = input.split(at: 6.2)
        let finalize = #"{"type":"finalize","through":5.5}"#
        let stall = 2.0
        let server = MemoryServer(speech: Self.engine) {
            $0.limits.bufferSeconds = 3600
            $0.limits.stallSeconds = stall
        }
        let a = try #require(server.connect().1)
        let b = try #require(server.connect().1)
        server.send(a, input.startMessage)
        server.send(b, input.startMessage)
        server.settle()
        var (ai, bi) = (0, -52)
        func sendB() {
            if bi >= 0 && bi < input.messages.count { server.send(b, audio: input.messages[bi]) }
            if bi == input.messages.count { server.send(b, #"{"type":"end"}"#) }
            bi += 1
        }
        while ai < before.count {
            server.send(a, audio: input.messages[ai])
            ai += 1
            sendB()
            server.settle()
        }
        server.send(a, finalize)
        sendB()
        server.settle()
        #expect(Self.engine.load.waiting == 1 && !server.events(a).contains { $0.type == "finalized" },
                "the finalize did not wait for the decoder: the test no longer tests it")
        // Time passes past the stall limit; B has sent more meanwhile (its lane has it to do).
        sendB()
        sendB()
        server.router.tick(now: SystemClock.now() + 5 * stall)
        server.settle()
        var told = false
        var rounds = 0
        while (ai <= input.messages.count || bi <= input.messages.count) && rounds < 1000 {
            rounds += 1
            told = told || server.events(a).contains { $0.type == "finalized" }
            if told && ai < input.messages.count { server.send(a, audio: input.messages[ai]) }
            if told && ai == input.messages.count { server.send(a, #"{"type":"end"}"#) }
            if told { ai += 1 }
            sendB()
            server.settle()
        }
        server.settle()
        #expect(told, "A was never told \"finalized\"")
        #expect(server.metrics.stalledUtterances.value == 0)
        #expect(Self.finals(server, a) == Self.reference(input, finalizeAt: before.count, finalize))
        #expect(Self.finals(server, b) == Self.reference(input))
    }

    static func finals(_ server: MemoryServer, _ id: ConnectionID) -> [TestResult] {
        server.connections.read(id)
        return server.connections.received(id).compactMap { try? WireEvent($0) }.finals
    }

    /// What `LocalSession` gives on the same engine, alone.
    static func reference(_ input: TestInput, finalizeAt index: Int? = nil, _ message: String = "") -> [TestResult] {
        let session = LocalSession(engine: engine)
        session.send(text: input.startMessage)
        for (i, audio) in input.messages.enumerated() {
            if i == index { session.send(text: message) }
            session.send(audio: audio)
        }
        session.end()
        return session.events.compactMap { try? WireEvent($0.text) }.finals
    }
}
