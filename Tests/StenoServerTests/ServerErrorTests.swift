import Foundation
import StenoCore
import Testing
@testable import StenoServer

/// docs/protocol.md's error table on a real server, over a real socket: one case of each kind
/// of row (the code, whether it is fatal, the close code after a fatal one, that a non-fatal one
/// leaves the session working). Every row and every case is tested in memory, without sockets
/// or the model, by SessionServiceTests; these show that what it checks is what a client gets.
@Suite struct ServerErrorTests {
    /// The Endgame line, 24 kHz: short speech for sessions that must get to their finals.
    static let endgame = FormatInputs.pcm24k

    /// Sends `message` and returns the error it gets (reading what comes before it).
    private func errorFor(_ message: String, on client: StenoClient) throws -> WireEvent {
        try client.send(message)
        return try client.waitFor("error", timeout: 30)
    }

    @Test func badMessagesAreNonFatalBeforeAndAfterStart() throws {
        let input = Self.endgame
        let server = try LiveServer()
        let client = try server.connect()
        let beforeStart = [
            "hello",                                    // not JSON
            "[1,2]",                                     // not an object
            #"{"audio":{}}"#,                            // no type
            #"{"type":"jump"}"#,                         // unknown type
            #"{"type":"start"}"#,                        // start without audio
            #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":"fast","channels":1}}"#,
            StartMessage.text(input.format, extra: #""language":"fr-FR""#).replacingOccurrences(of: #""language":"en-US","#, with: ""),
        ]
        for message in beforeStart {
            let error = try errorFor(message, on: client)
            #expect(error.errorCode == "bad_message" && error.bool("fatal") == false, "\(message) → \(error)")
            #expect(error.string("message")?.isEmpty == false)
        }
        try client.start(input)
        let afterStart = [
            #"{"type":"finalize","through":"soon"}"#,    // invalid field
            #"{"type":"finalize","through":-1}"#,
            #"{"type":"end""#,                           // cut short
            "",
            #"{"type":"nope"}"#,
        ]
        for message in afterStart {
            let error = try errorFor(message, on: client)
            #expect(error.errorCode == "bad_message" && error.bool("fatal") == false, "\(message) → \(error)")
        }
        // The session goes on as if nothing happened.
        try client.send(audio: input.messages, of: input)
        try client.end()
        expectEndedNormally(client, audio: input.duration, allowErrors: true)
        #expect(client.events.errors.count == beforeStart.count + afterStart.count)
        #expect(client.events.finals == Reference.finals(input))
        let metrics = try server.metrics()
        #expect(metrics[#"steno_errors_total{code="bad_message"}"#] == Double(beforeStart.count + afterStart.count))
    }

    @Test func pcmThatIsNotWholeFramesIsDroppedWithBadAudio() throws {
        let clean = Self.endgame
        var input = clean
        input.name += " with a torn frame"
        input.messages.insert([1, 2, 3], at: 10)      // 1.5 frames of s16le
        let server = try LiveServer()
        let client = try server.connect()
        try client.start(input)
        try client.send(audio: input.messages, of: input)
        try client.end()
        expectEndedNormally(client, audio: clean.duration, allowErrors: true)
        #expect(client.events.errors.map(\.errorCode) == ["bad_audio"])
        #expect(client.events.errors.first?.bool("fatal") == false)
        // The torn frame was dropped whole: the words are those of the clean audio.
        #expect(client.events.finals == Reference.finals(clean))
    }

    @Test func undecodableOpusIsConcealedCountedAndTheSessionGoesOn() throws {
        let packets = Speech.opusPackets(Speech.resample(Speech.endgame24k, from: 24000, to: 48000))
        var messages = packets
        // A packet with no header at all, and one whose header is fine but whose first frame
        // claims more bytes than the packet has (libopus: invalid packet).
        messages.insert([], at: 40)
        messages.insert([(packets[60][0] & 0xFC) | 2, 251, 1, 2, 3], at: 60)
        let input = TestInput(name: "endgame opus with bad packets", format: .pcm(48000, encoding: .opus), messages: messages)
        let server = try LiveServer()
        let client = try server.connect()
        try client.start(input)
        try client.send(audio: input.messages, of: input)
        try client.end()
        expectEndedNormally(client, audio: input.duration, allowErrors: true)
        #expect(client.events.errors.map(\.errorCode) == ["bad_audio", "bad_audio"], "\(client.events.errors)")
        #expect(client.events.errors.allSatisfy { $0.bool("fatal") == false })
        #expect(client.events.finals == Reference.finals(input))
        #expect(!client.events.finals.isEmpty)
        let metrics = try server.metrics()
        #expect(metrics[#"steno_errors_total{code="bad_audio"}"#] == 2)
    }

    @Test func messagesAfterEndAreRefusedWithoutHarmAndCancelStillWorks() throws {
        let input = Self.endgame
        let server = try LiveServer()
        let client = try server.connect()
        try client.start(input)
        try client.send(audio: input.messages, of: input)
        try client.send(#"{"type":"end"}"#)
        // Audio after end (one warning, however many frames), a second end, a finalize.
        try client.send(audio: Array(input.messages.prefix(3)), of: input)
        try client.send(#"{"type":"end"}"#)
        try client.send(#"{"type":"finalize"}"#)
        try client.readUntilClose()
        expectEndedNormally(client, audio: input.duration, allowErrors: true)
        #expect(client.events.errors.map(\.errorCode) == ["bad_message", "bad_message", "bad_message"], "\(client.events.errors)")
        #expect(client.events.errors.allSatisfy { $0.bool("fatal") == false })
        #expect(client.events.finals == Reference.finals(input))

        // Cancel is honoured while ending, and right after start (before the recognizer is ready).
        for early in [true, false] {
            let c = try server.connect()
            try c.send(StartMessage.text(input.format))
            if !early {
                try c.send(audio: input.messages, of: input)
                try c.send(#"{"type":"end"}"#)
            }
            try c.send(#"{"type":"cancel"}"#)
            try c.readUntilClose()
            #expect(c.events.types == ["ready", "cancelled"] || (!early && c.events.last?.type == "cancelled"), "\(c.events.types)")
            #expect(c.closeCode == 1000 && !c.events.types.contains("ended"))
        }
        #expect(eventually { server.server.sessionCount == 0 })
    }

    @Test(arguments: ["audio", "second start"])
    func anythingButStartFirstOrASecondStartCloses4400(_ what: String) throws {
        let server = try LiveServer()
        let client = try server.connect()
        switch what {
        case "audio":
            try client.ws.sendBinary([0, 0, 0, 0])
        case "second start":
            try client.start(Self.endgame)
            try client.send(StartMessage.text(Self.endgame.format))
        default:
            try client.send(what)
        }
        try client.readUntilClose()
        expectFatal(client, "not_started", close: 4400, what)
        #expect(client.events.count == (what == "second start" ? 2 : 1), "\(client.events)")
    }

    @Test(arguments: [#""encoding":"opus","sampleRate":44100,"channels":1"#])
    func unsupportedAudioCloses1003(_ audio: String) throws {
        let server = try LiveServer()
        let client = try server.connect()
        try client.send(#"{"type":"start","audio":{\#(audio)}}"#)
        try client.readUntilClose()
        expectFatal(client, "unsupported_audio", close: 1003, audio)
        #expect(client.events.count == 1, "\(client.events)")
    }

    // The transport's assembly is what only a socket shows: a whole frame, a message in
    // fragments each under the limit, before start.
    @Test(arguments: ["binary", "binary in fragments", "binary before start"])
    func aFrameOverTheLimitCloses1009(_ what: String) throws {
        let limit = 8192    // the next session's 100 ms messages (4800 bytes) fit
        let server = try LiveServer { $0.limits.maxFrameBytes = limit }
        let client = try server.connect()
        if what != "binary before start" { try client.start(Self.endgame) }
        if what == "binary in fragments" {
            // Each fragment is small; the message is not. (The last fragment crosses the
            // limit: a server that closes with input still unread resets the connection.)
            try client.ws.sendBinary([UInt8](repeating: 0, count: limit + 500), fragmentSize: 1000)
        } else {
            try client.ws.sendBinary([UInt8](repeating: 0, count: limit + 2))
        }
        try client.readUntilClose()
        expectFatal(client, "too_large", close: 1009, what)
        // And the server goes on.
        let next = try server.connect()
        try next.start(Self.endgame)
        try next.send(audio: Array(Self.endgame.messages.prefix(3)), of: Self.endgame)
        try next.end()
        expectEndedNormally(next, audio: 0.3)
    }

    @Test func theSessionLimitFinalizesThenCloses4009() throws {
        let input = Self.endgame
        let server = try LiveServer { $0.limits.maxSessionSeconds = 3 }
        let client = try server.connect()
        try client.start(input)
        // All the audio (well before the limit), then nothing: the server ends the session.
        try client.send(audio: input.messages, of: input)
        try client.readUntilClose()
        expectFatal(client, "session_limit", close: 4009)
        expectWellFormed(Array(client.events.dropLast()), audio: input.duration)
        #expect(client.events.finals == Reference.finals(input), "the finals come before the error")
    }

    @Test func idleBeforeStartCloses4010AtOnce() throws {
        let server = try LiveServer { $0.limits.idleTimeoutSeconds = 0.5 }
        let client = try server.connect()
        try client.readUntilClose(timeout: 30)
        expectFatal(client, "idle", close: 4010)
        #expect(client.events.count == 1)
    }
}
