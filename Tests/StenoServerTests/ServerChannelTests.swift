import Foundation
import StenoCore
import Testing
@testable import StenoServer
import StenoTestSupport

/// Broadcast channels end to end: a publisher, viewers joining mid-stream, a viewer that does
/// not read, a second would-be publisher, and the caption files.
@Suite struct ServerChannelTests {
    /// Bad messages from a viewer, back to back: each is answered with an error event.
    static func flood(_ viewer: StenoClient, count: Int) throws {
        var burst: [UInt8] = []
        for i in 0..<count {
            burst += WebSocketTestClient.encodeFrame(opcodeValue: 1, Array("let me talk \(i)".utf8))
        }
        try viewer.ws.sendRaw(burst, timeout: 60)
    }

    static func slowConsumers(_ server: LiveServer) -> Double {
        (try? server.metrics()[#"steno_errors_total{code="slow_consumer"}"#]) ?? nil ?? 0
    }

    @Test func viewersGetBackfillAndLiveEventsAndASlowViewerHurtsNobody() throws {
        let input = TestInput.pcm16k()
        let (firstHalf, secondHalf, _) = input.split(at: 5.2)
        let server = try LiveServer { $0.limits.outboundBytes = 64 * 1024 }

        let publisher = try server.connect()
        let ready = try publisher.start(input, extra: #""channel":"studio-a""#)
        try publisher.send(audio: firstHalf, of: input)
        while publisher.events.finals.count < 2 {
            guard try publisher.next() != nil else { break }
        }
        let finalsBeforeJoin = publisher.events.finals.count
        #expect(finalsBeforeJoin >= 2)

        // A viewer joins mid-stream.
        let viewer = try server.connect(path: "/v1/listen?channel=studio-a")
        let joined = try viewer.waitFor("joined")
        #expect(joined.string("channel") == "studio-a")
        #expect(joined.string("startedAt") == ready.string("startedAt"))

        // A viewer that never reads (and talks instead): its replies pile up until it is closed.
        let slow = try server.connect(path: "/v1/listen?channel=studio-a", receiveBufferSize: 2048)
        try Self.flood(slow, count: 40_000)
        #expect(eventually(timeout: 60) { Self.slowConsumers(server) >= 1 })
        try slow.readUntilClose(timeout: 60)
        expectSlowConsumerClose(slow, "the silent viewer")

        // Someone else tries to publish on the channel: told so, and not published.
        let intruder = try server.connect()
        try intruder.start(FormatInputs.pcm24k, extra: #""channel":"studio-a""#)
        let refused = try intruder.waitFor("error")
        #expect(refused.errorCode == "bad_message" && refused.bool("fatal") == false, "\(refused)")
        try intruder.send(audio: FormatInputs.pcm24k.messages, of: FormatInputs.pcm24k)
        try intruder.end()
        expectEndedNormally(intruder, audio: FormatInputs.pcm24k.duration, "the second publisher", allowErrors: true)
        #expect(intruder.events.finals == Reference.finals(FormatInputs.pcm24k))

        try publisher.send(audio: secondHalf, of: input)
        try publisher.end()
        expectEndedNormally(publisher, audio: input.duration, "the publisher")
        let finals = publisher.events.finals
        #expect(finals == Reference.finals(input), "the publisher's words are what they are alone")

        // The viewer saw every final once, in order: the backfill, then live.
        #expect(try eventually(timeout: 60) {
            try viewer.readAvailable()
            return viewer.events.finals.count >= finals.count || viewer.isClosed
        })
        #expect(viewer.events.finals == finals)
        let types = viewer.events.types
        #expect(types.first == "joined")
        #expect(types.dropFirst().first == "publisher", "the broadcast's state comes with joined")
        #expect(viewer.events.first { $0.type == "publisher" }?.string("state") == "live")
        let backfill = types.dropFirst(2).prefix { $0 == "final" }.count
        #expect(backfill >= finalsBeforeJoin, "\(types)")
        #expect(Set(types).isSubset(of: ["joined", "publisher", "final", "volatile", "speech"]), "\(Set(types))")
        #expect(viewer.events.map(\.seq) == Array(1...viewer.events.count))
        #expect(!viewer.isClosed)

        // The channel's captions.
        let vtt = try server.get("/v1/channels/studio-a/captions.vtt")
        #expect(vtt.status == 200)
        #expect(vtt.header("content-type")?.hasPrefix("text/vtt") == true, "\(vtt)")
        #expect(vtt.bodyText.hasPrefix("WEBVTT"))
        let srt = try server.get("/v1/channels/studio-a/captions.srt")
        #expect(srt.status == 200)
        for (name, body) in [("vtt", vtt.bodyText), ("srt", srt.bodyText)] {
            // Every word of the finals, once, in order; cues by the caption rules.
            let cueLines = body.components(separatedBy: "\n\n").flatMap { block in
                block.split(separator: "\n").filter { !$0.contains("-->") && $0 != "WEBVTT" && Int($0) == nil }
            }
            #expect(cueLines.joined(separator: " ").split(separator: " ") == finals.flatMap { $0.text.split(separator: " ") },
                    "\(name):\n\(body)")
            expectCaptionRules(body, "\(name)")
        }
        #expect(srt.bodyText.hasPrefix("1\n") || srt.bodyText.hasPrefix("1\r\n"), "\(srt.bodyText.prefix(40))")
        try viewer.ws.close()
    }

    @Test func aViewerThatTalksWithoutReadingIsClosedWith4008EvenWhenNothingIsPublished() throws {
        let server = try LiveServer { $0.limits.outboundBytes = 16 * 1024 }
        let watcher = try server.connect(path: "/v1/listen?channel=quiet")
        _ = try watcher.waitFor("joined")
        let slow = try server.connect(path: "/v1/listen?channel=quiet", receiveBufferSize: 2048)
        try Self.flood(slow, count: 40_000)
        #expect(eventually(timeout: 60) { Self.slowConsumers(server) >= 1 })
        try slow.readUntilClose(timeout: 60)
        expectSlowConsumerClose(slow, "the viewer that talks")
        #expect(slow.events.first?.type == "joined")
        #expect(slow.events.dropFirst().allSatisfy { $0.errorCode == "bad_message" || $0.errorCode == "slow_consumer" })
        #expect(slow.events.map(\.seq) == Array(1...slow.events.count))
        // The other viewer is still there.
        let health = try server.get("/healthz")
        #expect(health.bodyText.contains(#""viewers":1"#), "\(health.bodyText)")
        try watcher.ws.close()
    }

    @Test func whenAPublisherEndsTheNextOneTakesOverAtOnce() throws {
        let input = FormatInputs.pcm24k
        let server = try LiveServer()
        let viewer = try server.connect(path: "/v1/listen?channel=relay")
        _ = try viewer.waitFor("joined")
        var readies: [WireEvent] = []
        var finals: [TestResult] = []
        var previous: StenoClient?
        for round in 0..<3 {
            let publisher = try server.connect()
            publisher.ws.autoCloseReply = false
            readies.append(try publisher.start(input, extra: #""channel":"relay""#))
            try publisher.send(audio: input.messages, of: input)
            // The previous publisher's connection is closed only now, after this one started.
            previous?.disconnect()
            try publisher.send(#"{"type":"end"}"#)
            _ = try publisher.waitFor("ended")
            #expect(publisher.events.errors.isEmpty, "round \(round): \(publisher.events.errors)")
            finals += publisher.events.finals
            previous = publisher
        }
        previous?.disconnect()
        #expect(try eventually(timeout: 60) {
            try viewer.readAvailable()
            return viewer.events.finals.count >= finals.count
        })
        #expect(viewer.events.finals == finals)
        // Each publisher's events follow a fresh `joined` with its own start time.
        let joins = viewer.events.filter { $0.type == "joined" }
        #expect(joins.count == 4, "\(viewer.events.types)")
        #expect(joins.dropFirst().map { $0.string("startedAt") } == readies.map { $0.string("startedAt") })
        #expect(viewer.events.map(\.seq) == Array(1...viewer.events.count))
        try viewer.ws.close()
    }

    @Test func aViewerThatVanishedIsPingedThenHungUpOnWhileOneThatAnswersStays() throws {
        // Pinged 1 s after connecting (and after each pong); hung up on after 12 s without a pong.
        let server = try LiveServer { $0.keepAlive = .seconds(1) }
        let port = server.port
        let results = onThreads([
            { @Sendable () throws -> String in
                // Reads frames as they come and answers nothing, like a peer that is gone.
                let gone = try WebSocketTestClient.connect(port: port, path: "/v1/listen?channel=quiet", timeout: 30)
                var frames: [String] = []
                let deadline = Deadline(60)
                do {
                    while !deadline.hasPassed {
                        let frame = try gone.readFrame(deadline: Deadline(60))
                        frames.append("\(frame.opcode)")
                    }
                } catch TestClientError.closed {
                    return frames.joined(separator: " ") + " | hung up"
                }
                return frames.joined(separator: " ") + " | still open"
            },
            { @Sendable () throws -> String in
                // Answers pings (inside receive) for as long as the other one takes to go.
                let here = try WebSocketTestClient.connect(port: port, path: "/v1/listen?channel=quiet", timeout: 30)
                let deadline = Deadline(20)
                while !deadline.hasPassed {
                    do { _ = try here.receive(timeout: 0.5) } catch TestClientError.timeout {}
                }
                try here.sendPing([7, 7])
                var message = try here.receive(timeout: 10)
                if case .text = message { message = try here.receive(timeout: 10) } // `joined`
                // Still open, and the only viewer left (asked while this one is connected).
                let health = try HTTPTestClient.get(port: port, "/healthz").bodyText
                return "\(message) \(health.contains(#""viewers":1"#) ? "alone" : health)"
            },
        ])
        let goneSaw = try results[0].get()
        #expect(goneSaw.contains("ping") && goneSaw.hasSuffix("| hung up"), "\(goneSaw)")
        #expect(try results[1].get() == "pong(2 bytes) alone")
    }

    @Test func badChannelNamesAreRefusedAtTheHandshake() throws {
        let server = try LiveServer()
        for path in ["/v1/listen", "/v1/listen?channel=", "/v1/listen?channel=bad%20name", "/v1/listen?channel=a/b",
                     "/v1/listen?channel=..", "/v1/listen?channel=" + String(repeating: "x", count: 65)] {
            switch try WebSocketTestClient.attempt(port: server.port, path: path, timeout: 30) {
            case .upgraded(let client):
                Issue.record("\(path) was accepted")
                client.disconnect()
            case .refused(let response):
                #expect(response.status == 400, "\(path): \(response)")
            }
        }
        // In a start, a bad name is a bad message: the session may try again.
        let client = try server.connect()
        try client.send(StartMessage.text(.pcm(16000), extra: #""channel":"no spaces""#))
        let error = try client.waitFor("error")
        #expect(error.errorCode == "bad_message" && error.bool("fatal") == false)
        try client.start(FormatInputs.pcm24k, extra: #""channel":"ok.name-1_2""#)
        try client.end()
        #expect(client.closeCode == 1000)
        #expect(try server.get("/v1/channels/ok.name-1_2/captions.vtt").status == 200)
    }
}
