import Foundation
import StenoCore
import Testing
import StenoTestSupport
@testable import StenoTransport

@Suite struct TransportBasicsTests {
    @Test func portZeroReportsTheBoundPort() throws {
        let server = try TestServer()
        #expect(server.port > 0)
        #expect(server.handle.port == server.port)
    }

    @Test func echoesTextAndBinary() throws {
        let server = try TestServer()
        let (client, id) = try server.connect()
        try client.sendText("hello")
        #expect(try client.receive() == .text("hello"))
        let bytes = (0..<3000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        try client.sendBinary(bytes)
        #expect(try client.receive() == .binary(bytes))
        try client.sendText("")
        #expect(try client.receive() == .text(""))
        #expect(server.control.received(id) == [.text("hello"), .binary(bytes), .text("")])
        let (_, close) = try client.close(code: 1000)
        #expect(close == .close(code: 1000, reason: ""))
        #expect(server.control.wait { server.control.wasClosed(id) })
    }

    /// The loop that is not the default still serves: messages both ways, a ping answered,
    /// a server-initiated close with its code, and a stop that waits for the thread.
    @Test(arguments: EventLoop.allCases.filter(\.isAvailable))
    func eachEventLoopServesAndCloses(_ loop: EventLoop) throws {
        let server = try TestServer { $0.eventLoop = loop }
        #expect(server.control.logLines.withLock { $0 }.contains { $0.contains("event loop: \(loop)") })
        let (client, id) = try server.connect()
        try client.sendText("hello")
        #expect(try client.receive() == .text("hello"))
        #expect(server.handle.send(id, .text("from the server")) == .queued)
        server.handle.close(id, code: 4000, reason: "done")
        let (messages, close) = try client.receiveUntilClose()
        #expect(messages == [.text("from the server")])
        #expect(close == .close(code: 4000, reason: "done"))
        #expect(server.control.wait { server.control.wasClosed(id) })
        server.stop()
        #expect(server.handle.connectionCount == 0)
    }
}
