import Foundation
import StenoCore
import StenoSpeech
import Testing
@testable import StenoServer
import StenoTestSupport

/// Many sessions at once, clients that vanish, and audio that is noise or nonsense.
@Suite struct ServerRobustnessTests {
    static let endgame = FormatInputs.pcm24k

    @Test func eightConcurrentSessionsAllGetTheirFinals() throws {
        let input = Self.endgame
        let server = try LiveServer { $0.maxSessions = 8 }
        let port = server.port
        let results = onThreads((0..<8).map { _ in
            { @Sendable () throws -> SessionRecord in
                let client = try StenoClient(port: port)
                try client.start(input)
                try client.send(audio: input.messages, of: input)
                try client.end()
                return client.record
            }
        })
        let reference = Reference.finals(input)
        for (i, result) in results.enumerated() {
            let record = try result.get()
            expectEndedNormally(record, audio: input.duration, "session \(i)")
            #expect(record.events.finals == reference, "session \(i)")
        }
        let ids = Set(try results.map { try $0.get().events.first?.string("session") ?? "" })
        #expect(ids.count == 8 && !ids.contains(""), "session ids \(ids)")
        #expect(eventually { server.server.sessionCount == 0 })
        #expect(try server.metrics()["steno_sessions_total"] == 8)
    }

    @Test func clientsThatVanishDoNotDisturbOthersAndGiveTheirRecognizerBack() throws {
        // An engine of its own, to count its decoders.
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 4))
        let input = TestInput.pcm16k()
        let (half, _, _) = input.split(at: 5)
        let server = try LiveServer(engine: engine) { $0.maxSessions = 2 }
        let port = server.port

        let results = onThreads([
            { @Sendable () throws -> SessionRecord in
                // Gone mid-stream, with audio still being analyzed.
                let client = try StenoClient(port: port)
                try client.start(input)
                try client.send(audio: half, of: input)
                client.disconnect()
                return client.record
            },
            { @Sendable () throws -> SessionRecord in
                let client = try StenoClient(port: port)
                try client.start(Self.endgame)
                try client.send(audio: Self.endgame.messages, of: Self.endgame)
                try client.end()
                return client.record
            },
        ])
        _ = try results[0].get()
        let survivor = try results[1].get()
        expectEndedNormally(survivor, audio: Self.endgame.duration, "the session alongside")
        #expect(survivor.events.finals == Reference.finals(Self.endgame))

        // Both recognizers go back to the engine.
        #expect(eventually { server.server.sessionCount == 0 })
        #expect(eventually { engine.idleDecoders == engine.decodersMade }, "\(engine.decoderStats)")
        let made = engine.decodersMade

        // Gone right after `start`, while the recognizer is being prepared; and gone before
        // `start`, and in the middle of a frame.
        for _ in 0..<3 {
            let client = try server.connect()
            try client.send(StartMessage.text(input.format))
            client.disconnect()
        }
        let early = try server.connect()
        early.disconnect()
        let torn = try server.connect()
        try torn.start(input)
        try torn.ws.sendRaw(Array(WebSocketTestClient.encodeFrame(opcodeValue: 2, input.messages[0]).prefix(100)))
        torn.disconnect()
        #expect(eventually { server.server.sessionCount == 0 })
        #expect(eventually { engine.idleDecoders == engine.decodersMade }, "\(engine.decoderStats)")

        // A following session starts (with a recognizer given back) and gets its words.
        let next = try StenoClient.transcribe(Self.endgame, on: server)
        expectEndedNormally(next, audio: Self.endgame.duration)
        #expect(next.events.finals == Reference.finals(Self.endgame))
        // Never more decoders than the pool holds, and every one is back.
        #expect(engine.decodersMade <= 4 && made <= 4, "\(engine.decoderStats)")
        #expect(eventually { engine.idleDecoders == engine.decodersMade }, "\(engine.decoderStats)")
    }

    @Test func noiseAndNonsenseAudioEndNormally() throws {
        var generator = SplitMix(seed: 0x57E40)
        let server = try LiveServer()
        // Random Opus packets: some decode to noise, some are concealed.
        let opus = TestInput(name: "random opus", format: .pcm(48000, encoding: .opus),
                             messages: (0..<150).map { _ in (0..<Int(generator.next() % 200)).map { _ in UInt8(truncatingIfNeeded: generator.next()) } })
        // Float PCM full of NaN, infinities, huge and tiny values, stereo.
        let specials: [Float] = [.nan, .infinity, -.infinity, 1e30, -1e30, .leastNonzeroMagnitude, 0, 1, -1]
        let floats = (0..<(16000 * 2 * 3)).map { i -> Float in
            i % 7 == 0 ? specials[Int(generator.next() % UInt64(specials.count))] : Float(Int(generator.next() % 2000) - 1000) / 1000
        }
        let bytes = floats.flatMap { v in (0..<4).map { UInt8(truncatingIfNeeded: v.bitPattern >> (8 * $0)) } }
        let f32 = TestInput(name: "special floats", format: .pcm(16000, encoding: .pcmF32LE, channels: 2),
                            messages: Speech.split(bytes, every: 6400))
        for input in [opus, f32] {
            let client = try StenoClient.transcribe(input, on: server)
            #expect(client.events.last?.type == "ended", "\(input.name): \(client.events.suffix(3))")
            #expect(client.closeCode == 1000, "\(input.name)")
            #expect(client.events.errors.allSatisfy { $0.errorCode == "bad_audio" && $0.bool("fatal") == false },
                    "\(input.name): \(client.events.errors.prefix(3))")
            expectWellFormed(client.events, audio: input.duration, input.name)
        }
    }
}
