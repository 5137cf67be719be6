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
}
