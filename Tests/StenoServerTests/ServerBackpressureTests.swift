import Foundation
import StenoCore
import StenoSystem
import Synchronization
import Testing
@testable import StenoServer

#if canImport(Glibc)
import Glibc
import StenoTestSupport
#endif

/// Flow control end to end: a client faster than analysis is held back by TCP without losing
/// a word, and a client that does not read is closed with 4008 without hurting anyone else.
@Suite struct ServerBackpressureTests {
    /// Beckett six times over: 60 s of speech.
    static let minute = TestInput.pcm16k("beckett x6", Array([[Float]](repeating: Speech.beckett16k, count: 6).joined()))

    @Test func aMinuteSentAsFastAsPossibleGetsEveryFinalWithBoundedBuffering() throws {
        let input = Self.minute
        let bufferSeconds = 3.0
        let server = try LiveServer { $0.limits.bufferSeconds = bufferSeconds }

        // The reference on another thread, while the server works.
        let reference = Thread { _ = Reference.finals(input) }
        reference.start()

        // Watch the server's inbound buffer while the client streams.
        let watching = Atomic<Bool>(true)
        let highest = Locked<Double>(0)
        let samples = Atomic<Int>(0)
        let port = server.port
        let watcher = Thread {
            while watching.load(ordering: .relaxed) {
                if let response = try? HTTPTestClient.get(port: port, "/metrics"), response.status == 200,
                   let value = LiveServer.parseMetrics(response.bodyText)["steno_inbound_buffered_audio_seconds"] {
                    highest.withLock { $0 = max($0, value) }
                    samples.add(1, ordering: .relaxed)
                }
                usleep(50_000)
            }
        }
        watcher.start()

        let client = try server.connect(sendBufferSize: 16 * 1024)
        try client.start(input)
        try client.send(audio: input.messages, of: input)
        let blocked = client.blockedWrites
        try client.end()
        watching.store(false, ordering: .relaxed)
        while !watcher.isFinished || !reference.isFinished { usleep(10_000) }

        expectEndedNormally(client, audio: input.duration)
        #expect(client.events.finals == Reference.finals(input))
        let peak = highest.withLock { $0 }
        #expect(samples.load(ordering: .relaxed) > 0)
        // Reading stops at the high-water mark; what lws had already read may still arrive.
        #expect(peak <= bufferSeconds + 1, "buffered audio peaked at \(peak) s")
        #expect(peak >= bufferSeconds / 2, "the buffer never filled (peak \(peak) s): the test did not press")
        // Sending 60 s of audio took the speed of analysis: the client's writes were held back.
        #expect(blocked > 0, "no write was ever held back")
    }

    @Test func aClientHeldBackByFlowControlIsNotTakenForGoneByTheKeepalive() throws {
        // Pinged after 1 s, hung up on after 12 s without proof of life, while the client
        // never answers a ping: the audio it sends is that proof, also when the server reads
        // it late because analysis holds the client back.
        let input = Self.minute
        let server = try LiveServer {
            $0.limits.bufferSeconds = 3
            $0.keepAlive = .seconds(1)
        }
        let client = try server.connect(sendBufferSize: 16 * 1024)
        client.ws.autoPong = false
        try client.start(input)
        try client.send(audio: input.messages, of: input)
        try client.end()
        expectEndedNormally(client, audio: input.duration)
        #expect(client.blockedWrites > 0, "the client was never held back: the test did not press")
        #expect(client.events.finals == Reference.finals(input))
    }

    @Test func aClientThatDoesNotReadIsClosedWith4008AndAParallelSessionIsUnaffected() throws {
        let input = TestInput.pcm16k()
        let server = try LiveServer { $0.limits.outboundBytes = 4096 }
        let port = server.port

        let results = onThreads([
            { @Sendable () throws -> (SessionRecord, Int) in
                // A well-behaved session alongside.
                let client = try StenoClient(port: port)
                try client.start(input)
                try client.send(audio: input.messages, of: input)
                try client.end()
                return (client.record, 0)
            },
            { @Sendable () throws -> (SessionRecord, Int) in
                // Every `finalize` is answered by a must-deliver `finalized`; this client reads none.
                let slow = try StenoClient(port: port, receiveBufferSize: 2048)
                try slow.start(input)
                // One burst, then silence: a client that closes its socket while the server
                // still has unread input from it gets a reset, which would lose the close frame.
                // ≈1 MB of messages: more replies than the socket buffers and the 4 KiB queue hold.
                let sent = 40_000
                var burst: [UInt8] = []
                for _ in 0..<sent {
                    burst += WebSocketTestClient.encodeFrame(opcodeValue: 1, Array(#"{"type":"finalize"}"#.utf8))
                }
                try slow.ws.sendRaw(burst, timeout: 30)
                let overflowed = eventually(timeout: 60) {
                    let m = try? LiveServer.parseMetrics(HTTPTestClient.get(port: port, "/metrics").bodyText)
                    return (m?[#"steno_errors_total{code="slow_consumer"}"#] ?? 0) > 0
                }
                guard overflowed else { throw TestClientError.timeout("waiting for the server to give up on the slow client") }
                try slow.readUntilClose(timeout: 60)
                return (slow.record, sent)
            },
        ])
        let (parallel, _) = try results[0].get()
        expectEndedNormally(parallel, audio: input.duration, "the parallel session")
        #expect(parallel.events.finals == Reference.finals(input))

        let (slow, sent) = try results[1].get()
        // readUntilClose returned: the connection is over. 4008, or a reset (see expectSlowConsumerClose).
        #expect(slow.closeCode == 4008 || slow.closeCode == nil,
                "close \(slow.closeCode.map(String.init) ?? "none") after \(sent) finalize messages; got \(slow.events.count) events, last \(slow.events.suffix(2))")
        #expect(slow.events.count < sent + 1)
        #expect(slow.events.dropFirst().allSatisfy { $0.type == "finalized" || ($0.type == "error" && $0.errorCode == "slow_consumer") },
                "\(Set(slow.events.types))")
        let seqs = slow.events.map(\.seq)
        #expect(seqs == Array(1...max(1, seqs.count)).prefix(seqs.count).map { $0 })
        let metrics = try server.metrics()
        #expect(metrics[#"steno_errors_total{code="slow_consumer"}"#] == 1)
    }

    /// Issue 12: a client that floods past its outbound limit and keeps flooding after the
    /// server gave up on it reads the 4008 close frame and then the end of the stream, not a
    /// reset, even when it reads only after lws stopped waiting for its answer to the close
    /// (5 s) and closed the socket. Without the transport's lingering close the socket is closed
    /// with the flood unread, and Linux resets the connection.
    @Test func aClientThatKeepsFloodingPastTheLimitReads4008AndTheEndOfTheStreamNotAReset() throws {
        let server = try LiveServer { $0.limits.outboundBytes = 4096 }
        let port = server.port
        let slow = try StenoClient(port: port, receiveBufferSize: 4096)
        slow.ws.autoPong = false
        slow.ws.autoCloseReply = false
        try slow.start(TestInput.pcm16k())
        // Every `finalize` is answered by a must-deliver `finalized`; this client reads none.
        let finalize = WebSocketTestClient.encodeFrame(opcodeValue: 1, Array(#"{"type":"finalize"}"#.utf8))
        let flood = SocketFlood(fd: slow.ws.stream.writeFD, frame: finalize)
        defer { flood.stop() }
        let overflowed = eventually(timeout: 60) {
            let m = try? LiveServer.parseMetrics(HTTPTestClient.get(port: port, "/metrics").bodyText)
            return (m?[#"steno_errors_total{code="slow_consumer"}"#] ?? 0) > 0
        }
        #expect(overflowed, "the server never gave up on the flooding client")
        usleep(6_000_000)  // past lws's 5 s wait for the answer to its close frame (not a timing check)
        let (messages, close) = try slow.ws.receiveUntilClose(timeout: 60)
        flood.stop()
        #expect(flood.bytes > 0)
        #expect(close == .close(code: 4008, reason: "slow_consumer"),
                "\(messages.count) messages, then \(close.map(String.init(describing:)) ?? "no close frame")")
        #expect(SocketFlood.endOfStream(slow.ws.stream.readFD) == 0, "a reset after the close frame, not the end of the stream")
        #expect(eventually { server.server.sessionCount == 0 })
    }
}
