import Foundation
import StenoCore
import Testing
import StenoTestSupport
import StenoTransport
@testable import StenoServer

/// `HandshakePolicy` deciding upgrades on a real transport: the refusals as clients see them.
@Suite struct HandshakeTests {
    static func policyServer(capacity: Int = 100) throws -> TestServer {
        var settings = TestControl.Settings()
        let policy = HandshakePolicy(paths: ["/v1/stream", "/v1/listen"], tokens: ["s3cret"],
                                     allowedOrigins: ["https://ok.example"], retryAfterSeconds: 7)
        settings.decide = { request, hasCapacity in policy.evaluate(request, hasCapacity: hasCapacity) }
        settings.capacity = capacity
        return try TestServer(settings)
    }

    func refusal(_ server: TestServer, path: String, headers: [(String, String)] = []) throws -> TestHTTPResponse {
        switch try WebSocketTestClient.attempt(port: server.port, path: path, headers: headers) {
        case .upgraded(let c):
            c.disconnect()
            Issue.record("\(path) was accepted")
            return TestHTTPResponse()
        case .refused(let r):
            return r
        }
    }

    @Test func unknownPathIs404() throws {
        let server = try Self.policyServer()
        let r = try refusal(server, path: "/v1/nope?token=s3cret")
        #expect(r.status == 404)
        #expect(r.reason == "Not Found")
        #expect(r.bodyText.contains("404"))
        #expect(try refusal(server, path: "/", headers: [("Authorization", "Bearer s3cret")]).status == 404)
        #expect(server.control.openedIDs.isEmpty)
    }

    @Test func missingOrWrongTokenIs401() throws {
        let server = try Self.policyServer()
        let none = try refusal(server, path: "/v1/stream")
        #expect(none.status == 401)
        #expect(none.header("WWW-Authenticate") == "Bearer")
        #expect(try refusal(server, path: "/v1/stream", headers: [("Authorization", "Bearer wrong")]).status == 401)
        #expect(try refusal(server, path: "/v1/stream", headers: [("Authorization", "Basic czNjcmV0")]).status == 401)
        #expect(try refusal(server, path: "/v1/stream?token=wrong").status == 401)
        #expect(try refusal(server, path: "/v1/stream?token=s3cre").status == 401)
        #expect(try refusal(server, path: "/v1/stream?token=s3cret0").status == 401)
        #expect(server.control.openedIDs.isEmpty)
    }

    @Test func rightTokenInHeaderOrQueryIsAccepted() throws {
        let server = try Self.policyServer()
        let (a, _) = try server.connect(headers: [("Authorization", "Bearer s3cret")])
        try a.sendText("a")
        #expect(try a.receive() == .text("a"))
        let (b, bID) = try server.connect(path: "/v1/listen?channel=studio%20a&token=s3cret")
        try b.sendText("b")
        #expect(try b.receive() == .text("b"))
        let opened = server.control.events.compactMap { e -> UpgradeRequest? in
            if case .opened(bID, let r) = e { r } else { nil }
        }.first
        let request = try #require(opened)
        #expect(request.path == "/v1/listen")
        #expect(request.queryValue("channel") == "studio a")
        #expect(request.queryValue("token") == "s3cret")
        #expect(request.remoteAddress.hasSuffix("127.0.0.1"))
        #expect(request.headers["host"] == "127.0.0.1:\(server.port)")
    }

    @Test func originNotAllowedIs403() throws {
        let server = try Self.policyServer()
        let bad = try refusal(server, path: "/v1/stream?token=s3cret", headers: [("Origin", "https://evil.example")])
        #expect(bad.status == 403)
        let (ok, _) = try server.connect(path: "/v1/stream?token=s3cret", headers: [("Origin", "https://ok.example")])
        try ok.sendText("fine")
        #expect(try ok.receive() == .text("fine"))
    }

    @Test func atCapacityIs503WithRetryAfter() throws {
        let server = try Self.policyServer(capacity: 2)
        let (a, aID) = try server.connect(path: "/v1/stream?token=s3cret")
        let (b, _) = try server.connect(path: "/v1/stream?token=s3cret")
        let full = try refusal(server, path: "/v1/stream?token=s3cret")
        #expect(full.status == 503)
        #expect(full.header("Retry-After") == "7")
        // The refused connection is closed by the server.
        // A slot frees up when a connection closes.
        try a.close()
        #expect(server.control.wait { server.control.wasClosed(aID) })
        let (c, _) = try server.connect(path: "/v1/stream?token=s3cret")
        try b.sendText("b")
        #expect(try b.receive() == .text("b"))
        try c.sendText("c")
        #expect(try c.receive() == .text("c"))
    }

    @Test func theServerHangsUpAfterARefusal() throws {
        let server = try Self.policyServer()
        let stream = try TestStream.tcp(port: server.port)
        let request = "GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        try stream.write(Array(request.utf8))
        var r = try TestHTTPResponse.readHead(from: stream, deadline: Deadline(5))
        try r.readBody(from: stream, deadline: Deadline(5))
        #expect(r.status == 401)
        #expect(r.header("Connection")?.lowercased() == "close")
        #expect(r.header("Server") == "steno")
        #expect(try stream.awaitEOF(deadline: Deadline(10)) == 0)
    }
}
