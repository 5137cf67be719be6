import Foundation
import StenoCore
import Testing
@testable import StenoTransport
import StenoTestSupport

@Suite struct TransportRobustnessTests {
    /// Every `closed` belongs to an `opened`, and none is reported twice.
    static func checkBalanced(_ events: [TransportEvent]) {
        var opened = Set<ConnectionID>()
        var closed = Set<ConnectionID>()
        for e in events {
            switch e {
            case .opened(let id, _): opened.insert(id)
            case .closed(let id):
                #expect(opened.contains(id), "closed \(id) was never opened")
                #expect(!closed.contains(id), "closed \(id) twice")
                closed.insert(id)
            default: break
            }
        }
    }

    @Test func halfMadeConnectionsDoNotHurtTheServer() throws {
        let server = try TestServer()
        let port = server.port
        let upgradeHead = "GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        let key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        var held: [TestStream] = []  // left open until the end
        func send(_ bytes: [UInt8], close: Bool = false) throws {
            let s = try TestStream.tcp(port: port)
            try? s.write(bytes, timeout: 2)
            if close { s.close() } else { held.append(s) }
        }

        // Connect and close at once, many times.
        for _ in 0..<20 { try TestStream.tcp(port: port).close() }
        // Connect and reset (SO_LINGER 0).
        for _ in 0..<5 {
            let s = try TestStream.tcp(port: port)
            var l = linger(l_onoff: 1, l_linger: 0)
            setsockopt(s.readFD, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
            s.close()
        }
        // Garbage instead of a request.
        var rng = SystemRandomNumberGenerator()
        for n in [1, 16, 500, 5000] {
            try send((0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
        // Truncated handshakes: the client goes away, or stays silent.
        for cut in [3, 20, upgradeHead.utf8.count, upgradeHead.utf8.count + 10] {
            let bytes = Array(Array((upgradeHead + key).utf8).prefix(cut))
            try send(bytes, close: true)
            try send(bytes)
        }
        // A truncated handshake and a half-closed socket.
        do {
            let s = try TestStream.tcp(port: port)
            try s.write(Array(upgradeHead.utf8))
            s.shutdownWrite()
            held.append(s)
        }
        // Upgrade requests lws refuses after the delegate accepted (no key, bad
        // version, no Connection: Upgrade), other upgrades, broken request lines.
        for request in [upgradeHead + "Sec-WebSocket-Version: 13\r\n\r\n",
                        upgradeHead + key + "Sec-WebSocket-Version: 7\r\n\r\n",
                        "GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n" + key + "Sec-WebSocket-Version: 13\r\n\r\n",
                        "GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
                        "GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: bogus\r\nConnection: Upgrade\r\n\r\n",
                        "GET /v1/stream HTTP/9.9\r\n\r\n",
                        "BREW /pot HTCPCP/1.0\r\n\r\n",
                        "GET \r\n\r\n"] {
            try send(Array(request.utf8))
        }
        // An enormous header.
        try send(Array((upgradeHead + "X-Big: " + String(repeating: "a", count: 100_000) + "\r\n\r\n").utf8))
        // A full handshake, then gone before reading the 101.
        try send(Array((upgradeHead + key + "Sec-WebSocket-Version: 13\r\n\r\n").utf8), close: true)
        // A handshake with a frame right behind it, then gone.
        try send(Array((upgradeHead + key + "Sec-WebSocket-Version: 13\r\n\r\n").utf8)
                    + WebSocketTestClient.encodeFrame(opcodeValue: 1, Array("early".utf8)), close: true)

        // The server still serves WebSocket and HTTP while all that is pending.
        let (client, _) = try server.connect()
        try client.sendText("still alive")
        #expect(try client.receive() == .text("still alive"))
        #expect(try HTTPTestClient.get(port: port, "/nothing").status == 404)
        try client.close()
        for s in held { s.close() }
        #expect(server.control.wait { server.handle.connectionCount == 0 })
        server.stop()
        Self.checkBalanced(server.control.events)
    }

    @Test func aClientClosingMidMessageOrMidWriteIsFine() throws {
        let server = try TestServer()
        let (a, aID) = try server.connect()
        try a.sendFrame(.binary, [UInt8](repeating: 1, count: 1000), fin: false)
        a.disconnect()
        let (b, bID) = try server.connect(receiveBufferSize: 4096)
        for _ in 0..<200 { server.handle.send(bID, .binary([UInt8](repeating: 2, count: 16 * 1024))) }
        b.disconnect()
        #expect(server.control.wait { server.control.wasClosed(aID) && server.control.wasClosed(bID) })
        #expect(server.handle.send(bID, .text("x")) == .closed)
        Self.checkBalanced(server.control.events)
    }

    @Test func manyConnectionsOpenAndCloseConcurrently() throws {
        let server = try TestServer()
        let port = server.port
        let failures = TestControl(.init())
        let threads = (0..<4).map { t in
            Thread {
                for i in 0..<15 {
                    do {
                        let c = try WebSocketTestClient.connect(port: port)
                        try c.sendText("t\(t) m\(i)")
                        guard try c.receive() == .text("t\(t) m\(i)") else { throw TestClientError.protocolError("echo") }
                        if i % 2 == 0 { try c.close() } else { c.disconnect() }
                    } catch {
                        failures.logLines.withLock { $0.append("\(error)") }
                    }
                }
            }
        }
        let done = TestControl(.init())
        for t in threads { t.start() }
        #expect(done.wait(timeout: 60) { server.control.openedIDs.count == 60 })
        #expect(server.control.wait(timeout: 30) { server.handle.connectionCount == 0 })
        #expect(failures.logLines.withLock { $0 }.isEmpty)
        Self.checkBalanced(server.control.events)
    }
}

@Suite struct TransportTLSTests {
    /// A self-signed certificate for localhost, made with the openssl CLI.
    static func makeCertificate() throws -> (dir: URL, cert: String, key: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("steno-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let cert = dir.appendingPathComponent("cert.pem").path
        let key = dir.appendingPathComponent("key.pem").path
        let status = try runProgram("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                                         "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"])
        guard status == 0 else { throw TestClientError.protocolError("openssl req failed") }
        return (dir, cert, key)
    }

    @Test func tlsRoundTrip() throws {
        let (dir, cert, key) = try Self.makeCertificate()
        defer { try? FileManager.default.removeItem(at: dir) }
        var settings = TestControl.Settings()
        settings.routes["/healthz"] = HTTPResponse(status: 200, contentType: "application/json", text: #"{"status":"ok"}"#)
        let server = try TestServer(settings) { config in
            config.tlsCertificatePath = cert
            config.tlsKeyPath = key
        }
        #expect(server.transport.configuration.usesTLS)

        let (client, id) = try server.connect(tls: true)
        try client.sendText("over tls")
        #expect(try client.receive() == .text("over tls"))
        let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0) }
        try client.sendBinary(bytes, fragmentSize: 9000)
        #expect(try client.receive() == .binary(bytes))
        server.handle.send(id, .text("pushed"))
        #expect(try client.receive() == .text("pushed"))
        let (_, close) = try client.close(code: 1000)
        #expect(close == .close(code: 1000, reason: ""))

        let https = try HTTPTestClient.get(port: server.port, "/healthz", tls: true)
        #expect(https.status == 200)
        #expect(https.bodyText == #"{"status":"ok"}"#)

        // Plain HTTP on the TLS port is refused without harm.
        let plain = try TestStream.tcp(port: server.port)
        try? plain.write(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        _ = try? plain.readToEnd(deadline: Deadline(15))
        plain.close()
        let (again, _) = try server.connect(tls: true)
        try again.sendText("again")
        #expect(try again.receive() == .text("again"))
    }

    @Test func aMissingCertificateFailsToStart() throws {
        var config = TransportConfiguration(host: "127.0.0.1", port: 0, maxMessageSize: 65536, outboundByteLimit: 65536)
        config.tlsCertificatePath = "/nonexistent/cert.pem"
        config.tlsKeyPath = "/nonexistent/key.pem"
        config.log = .silent
        let transport = WebSocketTransport(configuration: config)
        let control = TestControl(.init())
        #expect(throws: WebSocketTransport.StartError.self) {
            try transport.start(delegate: EchoDelegate(handle: transport.handle, control: control))
        }
    }

    @Test func aTakenPortFailsToStart() throws {
        let first = try TestServer()
        var config = TransportConfiguration(host: "127.0.0.1", port: first.port, maxMessageSize: 65536,
                                            outboundByteLimit: 65536)
        config.log = .silent
        let transport = WebSocketTransport(configuration: config)
        #expect(throws: WebSocketTransport.StartError.self) {
            try transport.start(delegate: EchoDelegate(handle: transport.handle, control: TestControl(.init())))
        }
    }
}
