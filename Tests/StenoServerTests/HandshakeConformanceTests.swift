import Foundation
import StenoCore
import Testing
import StenoTestSupport
import StenoTransport
@testable import StenoServer

/// RFC 6455 §4.2 on the real transport: malformed opening handshakes get an HTTP answer
/// (426 or 400) before libwebsockets sees the upgrade, offered subprotocols Steno does not
/// speak are declined rather than dropped, and request heads are limited with 431 (issue 12).
/// Raw requests over a real socket; the server keeps serving others after each.
extension HandshakeTests {
    static let goodKey = "dGhlIHNhbXBsZSBub25jZQ=="

    /// A request head of `lines` (each without CRLF) and its answer: nil when the server hung
    /// up without one.
    static func raw(_ server: TestServer, _ lines: [String]) throws -> TestHTTPResponse? {
        try raw(port: server.port, lines)
    }

    static func raw(port: Int, _ lines: [String]) throws -> TestHTTPResponse? {
        let stream = try TestStream.tcp(port: port)
        defer { stream.close() }
        do {
            try stream.write(Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8), timeout: 10)
        } catch TestClientError.io {
            return nil  // cut while writing
        }
        var response: TestHTTPResponse
        do {
            response = try TestHTTPResponse.readHead(from: stream, deadline: Deadline(10))
        } catch TestClientError.closed {
            return nil
        }
        try response.readBody(from: stream, deadline: Deadline(10))
        return response
    }

    static func upgrade(method: String = "GET", path: String = "/v1/stream", http: String = "HTTP/1.1",
                        host: String? = "127.0.0.1", key: String? = goodKey,
                        version: String? = "13", connection: String? = "Upgrade", extra: [String] = []) -> [String] {
        var lines = ["\(method) \(path) \(http)"]
        if let host { lines.append("Host: \(host)") }
        lines.append("Upgrade: websocket")
        if let connection { lines.append("Connection: \(connection)") }
        if let key { lines.append("Sec-WebSocket-Key: \(key)") }
        if let version { lines.append("Sec-WebSocket-Version: \(version)") }
        return lines + extra
    }

    /// The server still upgrades and echoes for a well-formed client.
    static func stillServes(_ server: TestServer, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let (c, _) = try server.connect()
        try c.sendText("still here")
        #expect(try c.receive(timeout: 10) == .text("still here"), sourceLocation: sourceLocation)
        c.disconnect()
    }

    @Test func versionsOtherThan13Get426NamingVersion13() throws {
        let server = try TestServer()
        for version in ["0", "8", "99", "abc", "", "13, 8", nil] as [String?] {
            let r = try Self.raw(server, Self.upgrade(version: version))
            #expect(r?.status == 426, "version \(version ?? "missing"): \(r.map { "\($0)" } ?? "no answer")")
            #expect(r?.header("Sec-WebSocket-Version") == "13", "version \(version ?? "missing")")
        }
        #expect(server.control.openedIDs.isEmpty)
        try Self.stillServes(server)
    }

    @Test func aMissingOrMalformedKeyGets400() throws {
        let server = try TestServer()
        let fifteen = Data(repeating: 7, count: 15).base64EncodedString()
        let seventeen = Data(repeating: 7, count: 17).base64EncodedString()
        for key in [nil, "", "x", "AQ==", "not base64 at all!!!!!==", fifteen, seventeen, Self.goodKey + "AAAA"] as [String?] {
            let r = try Self.raw(server, Self.upgrade(key: key))
            #expect(r?.status == 400, "key \(key ?? "missing"): \(r.map { "\($0)" } ?? "no answer")")
            #expect(r?.bodyText.contains("Sec-WebSocket-Key") == true, "key \(key ?? "missing")")
        }
        #expect(server.control.openedIDs.isEmpty)
        // The RFC's own sample key is fine.
        let ok = try Self.raw(server, Self.upgrade())
        #expect(ok?.status == 101)
        try Self.stillServes(server)
    }

    @Test func aMissingHostOrConnectionUpgradeGets400() throws {
        let server = try TestServer()
        let noHost = try Self.raw(server, Self.upgrade(host: nil))
        #expect(noHost?.status == 400, "\(noHost.map { "\($0)" } ?? "no answer")")
        #expect(noHost?.bodyText.contains("Host") == true)
        for connection in [nil, "keep-alive", "close"] as [String?] {
            let r = try Self.raw(server, Self.upgrade(connection: connection))
            #expect(r?.status == 400, "Connection \(connection ?? "missing"): \(r.map { "\($0)" } ?? "no answer")")
        }
        // A list with Upgrade in it is fine (what Firefox sends).
        #expect(try Self.raw(server, Self.upgrade(connection: "keep-alive, Upgrade"))?.status == 101)
        try Self.stillServes(server)
    }

    @Test func anHTTP10HandshakeGets400() throws {
        let server = try TestServer()
        let r = try Self.raw(server, Self.upgrade(http: "HTTP/1.0"))
        #expect(r?.status == 400, "\(r.map { "\($0)" } ?? "no answer")")
        #expect(r?.bodyText.contains("HTTP/1.1") == true)
        #expect(try Self.raw(server, Self.upgrade(http: "HTTP/1.1"))?.status == 101)
        try Self.stillServes(server)
    }

    /// Pinned: RFC 7230 methods are case-sensitive, and RFC 6455 asks for `GET`. lws 4.1.6
    /// folds the request line to lowercase as it matches it (lib/roles/http/parsers.c, state
    /// WSI_TOKEN_NAME_PART), so `get` reaches Steno as GET and no check can tell them apart.
    @Test func aLowercaseMethodIsTakenAsGETByLws416() throws {
        let server = try TestServer()
        #expect(try Self.raw(server, Self.upgrade(method: "get"))?.status == 101)
    }

    @Test func anUnknownSubprotocolIsDeclinedNotDropped() throws {
        let server = try TestServer()
        func offer(_ list: String) throws -> WebSocketTestClient.Outcome {
            try WebSocketTestClient.attempt(port: server.port, headers: [("Sec-WebSocket-Protocol", list)], timeout: 10)
        }
        // Only protocols Steno does not speak: accepted, with none selected (RFC 6455 §4.2.2).
        for list in ["chat", "chat, superchat", "v2.example.com", "x-Custom_1"] {
            guard case .upgraded(let c) = try offer(list) else {
                Issue.record("offering \"\(list)\" was refused")
                continue
            }
            #expect(c.handshake.header("Sec-WebSocket-Protocol") == nil, "offering \"\(list)\": \(c.handshake)")
            try c.sendText(list)
            #expect(try c.receive(timeout: 10) == .text(list))
            c.disconnect()
        }
        // Steno's own is selected wherever it is in the list, also right after an unknown one.
        for list in ["steno", "chat, steno", "steno, chat"] {
            guard case .upgraded(let c) = try offer(list) else {
                Issue.record("offering \"\(list)\" was refused")
                continue
            }
            #expect(c.handshake.header("Sec-WebSocket-Protocol") == "steno", "offering \"\(list)\"")
            c.disconnect()
        }
        // A list lws could not read (not tokens, empty items, a number, too long) is a 400, not silence.
        for list in ["chat,,x", "a/b", "13", "\"chat\"", String(repeating: "p", count: 64),
                     (0..<30).map { "p\($0)" }.joined(separator: ", ")] {
            guard case .refused(let r) = try offer(list) else {
                Issue.record("offering \"\(list)\" was accepted")
                continue
            }
            #expect(r.status == 400 && r.bodyText.contains("Sec-WebSocket-Protocol"), "offering \"\(list)\": \(r)")
        }
        try Self.stillServes(server)
    }

    @Test func requestHeadsUpTo16KBAreServedAndLargerOnesGet431() throws {
        var settings = TestControl.Settings()
        settings.routes["/page"] = HTTPResponse(status: 200, text: "page\n")
        let server = try TestServer(settings)
        // A browser with 12 KB of cookies for the site (over lws's default of 4 KB).
        let cookies = [("Cookie", "session=" + String(repeating: "c", count: 12_000))]
        let (c, _) = try server.connect(headers: cookies)
        try c.sendText("with cookies")
        #expect(try c.receive(timeout: 10) == .text("with cookies"))
        c.disconnect()
        #expect(try HTTPTestClient.get(port: server.port, "/page", headers: cookies).status == 200)

        // Over 16 KB (and within what lws holds): 431, for an upgrade and for a plain request.
        let tooMany = [("Cookie", "session=" + String(repeating: "c", count: 20_000))]
        guard case .refused(let r) = try WebSocketTestClient.attempt(port: server.port, headers: tooMany, timeout: 10) else {
            Issue.record("a 20 KB request head was upgraded")
            return
        }
        #expect(r.status == 431, "\(r)")
        #expect(try HTTPTestClient.get(port: server.port, "/page", headers: tooMany).status == 431)
        try Self.stillServes(server)
    }

    /// The server counts what the transport refused before any route, by reason.
    @Test func malformedHandshakesAreCountedInMetrics() throws {
        let server = try LiveServer()
        #expect(try Self.raw(port: server.port, Self.upgrade(version: "8"))?.status == 426)
        #expect(try Self.raw(port: server.port, Self.upgrade(key: "x"))?.status == 400)
        #expect(try Self.raw(port: server.port, Self.upgrade(extra: ["Cookie: c=" + String(repeating: "c", count: 20_000)]))?.status == 431)
        let metrics = try server.metrics()
        #expect(metrics[#"steno_handshakes_refused_total{reason="malformed"}"#] == 2)
        #expect(metrics[#"steno_handshakes_refused_total{reason="header_too_large"}"#] == 1)
        #expect(metrics["steno_sessions_total"] == 0)
    }

    /// Slowloris from one address: past `--max-handshaking-per-address` silent connections, the
    /// next gets 429 before anything is read, counted in metrics; the server's own machine is
    /// not limited.
    @Test func silentConnectionsPastTheAddressLimitGet429AndAreCounted() throws {
        let server = try LiveServer { $0.maxHandshakingPerAddress = 2 }
        let silent = try (0..<2).map { _ in try TestStream.tcp(port: server.port, source: "127.0.0.2") }
        defer { for s in silent { s.close() } }
        let third = try TestStream.tcp(port: server.port, source: "127.0.0.2")
        defer { third.close() }
        #expect(try TestHTTPResponse.readHead(from: third, deadline: Deadline(10)).status == 429)
        let local = try (0..<3).map { _ in try TestStream.tcp(port: server.port) }
        defer { for s in local { s.close() } }
        let metrics = try server.metrics()
        #expect(metrics[#"steno_handshakes_refused_total{reason="address_limit"}"#] == 1)
        #expect(metrics[#"steno_handshakes_refused_total{reason="handshake_budget"}"#] == 0)
    }

    /// Pinned (docs/reliability.md): past the buffer libwebsockets 4.1.6 keeps for a request head
    /// (`maxRequestHeaderBytes` + `requestHeaderSlack`) its parser fails the connection
    /// ("Ran out of header data space", lib/roles/http/parsers.c `lws_pos_in_bounds`) and closes
    /// it with no callback to Steno, so no 431 can be written. If this starts getting an
    /// answer, lws changed: answer 431 there too.
    @Test func requestHeadsPastLwsBufferAreCutWithoutAnAnswer() throws {
        let server = try TestServer()
        let huge = "Cookie: session=" + String(repeating: "c", count: 40_000)
        let r = try Self.raw(server, Self.upgrade(extra: [huge]))
        #expect(r == nil, "lws answered a 40 KB request head: \(r.map { "\($0)" } ?? "")")
        try Self.stillServes(server)
    }
}
