import Dispatch
import Foundation
import StenoCore
import Testing
@testable import StenoTransport
import StenoTestSupport

/// TransportMessagingTests: paused reading, and a client that never reads.
extension TransportMessagingTests {
    @Test func pausedReadingReceivesNothingAndResumeDeliversEverything() throws {
        var settings = TestControl.Settings()
        settings.echo = false
        settings.pauseOnOpen = true
        let server = try TestServer(settings)
        let (client, id) = try server.connect(sendBufferSize: 16 * 1024)
        // Write until the socket stops taking data: the server is not reading.
        let frame = [UInt8](repeating: 0xA5, count: 16 * 1024)
        var sent = 0
        var blocked = false
        while sent < 4000 {
            var payload = frame
            payload[0] = UInt8(truncatingIfNeeded: sent)
            payload[1] = UInt8(truncatingIfNeeded: sent >> 8)
            do {
                try client.sendBinary(payload, timeout: 0.3)
                sent += 1
            } catch TestClientError.timeout {
                sent += 1  // the frame is queued in the client and will go out
                blocked = true
                break
            }
        }
        #expect(blocked, "the client could write \(sent) frames: the server kept reading")
        #expect(server.control.received(id).isEmpty)

        server.handle.setReading(id, true)
        try client.flush(timeout: 30)
        #expect(server.control.wait(timeout: 30) { server.control.received(id).count == sent })
        let got = server.control.received(id)
        #expect(got.count == sent)
        for (i, m) in got.enumerated() {
            guard case .binary(let b) = m, b.count == frame.count else { Issue.record("message \(i): \(m)"); break }
            #expect(Int(b[0]) | Int(b[1]) << 8 == i & 0xffff)
        }
    }

    @Test func pausingFromInsideReceivedStopsDeliveryThereAndResumeLosesNothing() throws {
        var settings = TestControl.Settings()
        settings.echo = false
        settings.pauseAfter = 10
        let server = try TestServer(settings)
        let (client, id) = try server.connect(sendBufferSize: 16 * 1024)
        // Small frames: many of them arrive in one read of lws's.
        var sent = 0
        var blocked = false
        while sent < 200_000 && !blocked {
            var frame = [UInt8](repeating: 0, count: 512)
            frame[0] = UInt8(truncatingIfNeeded: sent)
            frame[1] = UInt8(truncatingIfNeeded: sent >> 8)
            frame[2] = UInt8(truncatingIfNeeded: sent >> 16)
            do {
                try client.sendBinary(frame, timeout: 0.3)
            } catch TestClientError.timeout {
                blocked = true
            }
            sent += 1
        }
        #expect(blocked)
        // Messages lws had already read stay in its buffer while paused.
        #expect(server.control.received(id).count == 10)
        server.handle.setReading(id, true)
        try client.flush(timeout: 30)
        #expect(server.control.wait(timeout: 30) { server.control.received(id).count == sent })
        for (i, m) in server.control.received(id).enumerated() {
            guard case .binary(let b) = m else { Issue.record("message \(i): \(m)"); break }
            #expect(Int(b[0]) | Int(b[1]) << 8 | Int(b[2]) << 16 == i)
        }
    }

    @Test func aClientThatNeverReadsOverflowsAndIsClosedWith4008WhileOthersGoOn() throws {
        var settings = TestControl.Settings()
        settings.echo = true
        let server = try TestServer(settings) { $0.outboundByteLimit = 256 * 1024 }
        let (slow, slowID) = try server.connect(receiveBufferSize: 4096)
        let (fast, _) = try server.connect()

        // The server keeps sending must-deliver messages to a client that reads
        // nothing, while the other connection keeps echoing.
        let payload = OutgoingMessage.binary([UInt8](repeating: 0x42, count: 8 * 1024))
        var stuck = false
        var sent = 0
        var round = 0
        func roundTrip() throws {
            round += 1
            try fast.sendText("ping \(round)")
            #expect(try fast.receive() == .text("ping \(round)"))
        }
        while !stuck && sent < 20_000 {
            var overflowed = false
            for _ in 0..<16 {
                let r = server.handle.send(slowID, payload)
                if r == .overflow { overflowed = true; break }
                #expect(r == .queued)
                sent += 1
            }
            try roundTrip()
            if overflowed {
                // A burst can overflow before the service thread caught up; a client
                // that does not read keeps the queue full.
                try roundTrip()
                try roundTrip()
                stuck = (server.handle.queuedBytes(slowID) ?? 0) > 200 * 1024
            }
        }
        #expect(stuck)
        server.handle.close(slowID, code: 4008, reason: "slow_consumer", discardQueued: true)

        // The fast connection is unaffected.
        try fast.sendText("after")
        #expect(try fast.receive() == .text("after"))

        // Once the slow client finally reads, it gets what was already on its way,
        // then the 4008 close.
        let (messages, close) = try slow.receiveUntilClose(timeout: 30)
        #expect(close == .close(code: 4008, reason: "slow_consumer"))
        #expect(messages.count < sent)
        #expect(server.control.wait { server.control.wasClosed(slowID) })
    }
}
