import Dispatch
import Foundation
import StenoCore
import Testing
@testable import StenoTransport
import StenoTestSupport

/// TransportMessagingTests: closing a connection after or instead of what is queued, a close
/// that cannot flush, stopping with connections open; and the close codes that may be sent.
extension TransportMessagingTests {
    @Test func closeArrivesAfterTheQueuedMessages() throws {
        let server = try TestServer()
        let (client, id) = try server.connect()
        for i in 0..<200 {
            #expect(server.handle.send(id, .text("message \(i)")) == .queued)
        }
        server.handle.close(id, code: 4000, reason: "bye for now")
        #expect(server.handle.send(id, .text("too late")) == .closed)
        let (messages, close) = try client.receiveUntilClose()
        #expect(messages == (0..<200).map { .text("message \($0)") })
        #expect(close == .close(code: 4000, reason: "bye for now"))
        try client.close()
        #expect(server.control.wait { server.control.wasClosed(id) })
        #expect(server.handle.send(id, .text("gone")) == .closed)
    }

    @Test func closeCanDiscardWhatIsQueued() throws {
        let server = try TestServer()
        let (client, id) = try server.connect()
        server.handle.setReading(id, false)  // nothing else will be queued
        // Queued and closed on the service thread, so nothing is written before the close: from
        // another thread the service thread may write all 50 first (it did on a fast machine).
        let done = DispatchSemaphore(value: 0)
        let handle = server.handle
        handle.perform { _ in
            for i in 0..<50 { handle.send(id, .text("m\(i)")) }
            handle.close(id, code: 4008, reason: "slow_consumer", discardQueued: true)
            done.signal()
        }
        done.wait()
        let (messages, close) = try client.receiveUntilClose()
        #expect(messages.isEmpty, "\(messages.count) of the 50 queued were written")
        #expect(close == .close(code: 4008, reason: "slow_consumer"))
    }

    @Test func aCloseThatCannotFlushIsCutAfterTheFlushTimeout() throws {
        var settings = TestControl.Settings()
        settings.echo = false
        let server = try TestServer(settings) {
            $0.closeFlushTimeout = 0.3
            $0.tickInterval = 0.05
            $0.outboundByteLimit = 64 << 20
        }
        let (client, id) = try server.connect(receiveBufferSize: 4096)
        // Far more than the socket buffers hold; the client reads nothing.
        let chunk = OutgoingMessage.binary([UInt8](repeating: 1, count: 64 * 1024))
        for _ in 0..<200 { #expect(server.handle.send(id, chunk) == .queued) }
        server.handle.close(id, code: 4000, reason: "flush me")
        #expect(server.control.wait(timeout: 20) { server.control.wasClosed(id) })
        // Cut, not closed politely: the client finds the stream ends without the
        // whole queue and without a close frame.
        let (messages, close) = try client.receiveUntilClose(timeout: 20)
        #expect(close == nil)
        #expect(messages.count < 200)
    }

    @Test func stopWithOpenConnectionsReturnsAndClosesThem() throws {
        let server = try TestServer()
        var clients: [WebSocketTestClient] = []
        var ids: [ConnectionID] = []
        for _ in 0..<3 {
            let (c, id) = try server.connect()
            clients.append(c)
            ids.append(id)
        }
        // One of them is mid-message, one has queued output.
        try clients[0].sendFrame(.text, Array("half".utf8), fin: false)
        for i in 0..<100 { server.handle.send(ids[1], .text("queued \(i)")) }
        server.stop()
        for id in ids { #expect(server.control.wasClosed(id)) }
        #expect(server.handle.send(ids[2], .text("x")) == .closed)
        #expect(server.handle.connectionCount == 0)
        for c in clients { try? c.awaitDisconnect(timeout: 10) }
        server.stop()  // idempotent
    }
}

@Suite struct CloseCodeTests {
    @Test func codesThatMayNotBeSentBecome1011() throws {
        #expect(TransportHandle.mayBeSent(1000))
        #expect(TransportHandle.mayBeSent(1009))
        #expect(TransportHandle.mayBeSent(4008))
        for bad: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 2000, 5000] { #expect(!TransportHandle.mayBeSent(bad)) }
        let server = try TestServer()
        let (client, id) = try server.connect()
        server.handle.close(id, code: 1006, reason: "no such code")
        #expect(try client.receive() == .close(code: 1011, reason: "no such code"))
    }
}
