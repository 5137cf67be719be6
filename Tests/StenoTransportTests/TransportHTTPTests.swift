import Foundation
import StenoCore
import Testing
@testable import StenoTransport
import StenoTestSupport

@Suite struct TransportHTTPTests {
    static func server() throws -> TestServer {
        var settings = TestControl.Settings()
        settings.routes["/healthz"] = HTTPResponse(status: 200, contentType: "application/json",
                                                   text: #"{"status":"ok","sessions":0}"#, headers: [("X-Steno", "yes")])
        settings.routes["/draining"] = HTTPResponse(status: 503, contentType: "application/json",
                                                    text: #"{"status":"draining"}"#, headers: [("Retry-After", "5")])
        return try TestServer(settings)
    }

    @Test func dynamicRoutesAnswerWithStatusTypeHeadersAndBody() throws {
        let server = try Self.server()
        let r = try HTTPTestClient.get(port: server.port, "/healthz")
        #expect(r.status == 200)
        #expect(r.header("Content-Type") == "application/json")
        #expect(r.header("X-Steno") == "yes")
        #expect(r.header("Content-Length") == String(r.body.count))
        #expect(r.bodyText == #"{"status":"ok","sessions":0}"#)

        let d = try HTTPTestClient.get(port: server.port, "/draining")
        #expect(d.status == 503)
        #expect(d.header("Retry-After") == "5")

        let head = try HTTPTestClient.request(port: server.port, method: "HEAD", path: "/healthz")
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == "28")
        #expect(head.body.isEmpty)

        #expect(try HTTPTestClient.get(port: server.port, "/metrics").status == 404)
    }

    @Test func onlyGetAndHeadAreServed() throws {
        let server = try Self.server()
        let r = try HTTPTestClient.request(port: server.port, method: "POST", path: "/healthz",
                                           headers: [("Content-Length", "0")])
        #expect(r.status == 405)
        #expect(r.header("Allow") == "GET, HEAD")
        let del = try HTTPTestClient.request(port: server.port, method: "DELETE", path: "/healthz")
        #expect(del.status == 405)
    }

    @Test func postBodiesAreReadWholeAndAnsweredNowLaterOrStreamed() throws {
        var settings = TestControl.Settings()
        settings.post = { request, body, exchange, handle in
            switch request.path {
            case "/now":
                return HTTPResponse(status: 200, contentType: "text/plain", body: Array("got \(body.count)".utf8))
            case "/later":
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) {
                    handle.respond(exchange, HTTPResponse(status: 201, contentType: "text/plain", body: body.reversed()))
                }
                return nil
            default:
                DispatchQueue.global().async {
                    handle.respondStreaming(exchange, head: HTTPResponse(status: 200, contentType: "text/event-stream", body: []))
                    for i in 0..<3 {
                        Thread.sleep(forTimeInterval: 0.05)
                        handle.write(exchange, Array("data: \(i)\n\n".utf8), final: i == 2)
                    }
                }
                return nil
            }
        }
        let server = try TestServer(settings) { $0.maxBodyBytes = 100_000 }
        let big = [UInt8]((0..<50_000).map { UInt8($0 % 251) })
        let now = try HTTPTestClient.request(port: server.port, method: "POST", path: "/now", body: big)
        #expect(now.status == 200 && now.bodyText == "got 50000")
        let empty = try HTTPTestClient.request(port: server.port, method: "POST", path: "/now", body: [])
        #expect(empty.status == 200 && empty.bodyText == "got 0")
        let later = try HTTPTestClient.request(port: server.port, method: "POST", path: "/later", body: [1, 2, 3])
        #expect(later.status == 201 && later.body == [3, 2, 1])
        let streamed = try HTTPTestClient.request(port: server.port, method: "POST", path: "/stream", body: [0])
        #expect(streamed.status == 200 && streamed.header("Content-Length") == nil)
        #expect(streamed.bodyText == "data: 0\n\ndata: 1\n\ndata: 2\n\n")
        // Over the limit, or without a length: refused before any body is read.
        let large = try HTTPTestClient.request(port: server.port, method: "POST", path: "/now", body: [UInt8](repeating: 0, count: 100_001))
        #expect(large.status == 413)
        let unsized = try HTTPTestClient.request(port: server.port, method: "POST", path: "/now")
        #expect(unsized.status == 411)
    }

    @Test func keepAliveServesSeveralRequestsOnOneConnection() throws {
        let server = try Self.server()
        let stream = try TestStream.tcp(port: server.port)
        for _ in 0..<3 {
            try stream.write(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            var r = try TestHTTPResponse.readHead(from: stream, deadline: Deadline(5))
            try r.readBody(from: stream, deadline: Deadline(5))
            #expect(r.status == 200)
            #expect(r.bodyText.contains("ok"))
        }
        stream.close()
    }

    /// The status line of a raw request's answer.
    static func statusLine(_ port: Int, _ request: String) throws -> String {
        let stream = try TestStream.tcp(port: port)
        defer { stream.close() }
        try stream.write(Array(request.utf8))
        let line = try stream.read(through: Array("\r\n".utf8), deadline: Deadline(10))
        return String(decoding: line.dropLast(2), as: UTF8.self)
    }

    /// Issue 12: answers to WebSocket handshakes (written before lws would upgrade) say HTTP/1.1,
    /// not lws's HTTP/1.0, and statuses lws has no phrase for (its table stops at 417) get one.
    @Test func refusedHandshakesAnswerInHTTP11WithAReasonPhrase() throws {
        var settings = TestControl.Settings()
        settings.decide = { request, _ in
            request.path == "/busy" ? .reject(status: 503, headers: [("Retry-After", "5")]) : .reject(status: 429)
        }
        settings.routes["/big"] = HTTPResponse(status: 431, text: "too big\n")
        settings.routes["/upgrade"] = HTTPResponse(status: 426, text: "use a WebSocket\n")
        let server = try TestServer(settings)
        let port = server.port
        func handshake(_ path: String, version: String = "13", http: String = "HTTP/1.1") -> String {
            "GET \(path) \(http)\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: \(version)\r\n\r\n"
        }
        #expect(try Self.statusLine(port, handshake("/busy")) == "HTTP/1.1 503 Service Unavailable")
        #expect(try Self.statusLine(port, handshake("/other")) == "HTTP/1.1 429 Too Many Requests")
        // Refused by the transport's own checks.
        #expect(try Self.statusLine(port, handshake("/busy", version: "8")) == "HTTP/1.1 426 Upgrade Required")
        #expect(try Self.statusLine(port, handshake("/busy", http: "HTTP/1.0")) == "HTTP/1.1 400 Bad Request")
        let bigHead = "GET /busy HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "Cookie: \(String(repeating: "c", count: 20_000))\r\n\r\n"
        #expect(try Self.statusLine(port, bigHead) == "HTTP/1.1 431 Request Header Fields Too Large")
        // Plain HTTP keeps the request's version (lws knows it there) and gets the phrase.
        #expect(try Self.statusLine(port, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n") == "HTTP/1.1 431 Request Header Fields Too Large")
        #expect(try Self.statusLine(port, "GET /upgrade HTTP/1.1\r\nHost: x\r\n\r\n") == "HTTP/1.1 426 Upgrade Required")
        #expect(try Self.statusLine(port, "GET /upgrade HTTP/1.0\r\nHost: x\r\n\r\n") == "HTTP/1.0 426 Upgrade Required")
    }

    @Test func performRunsOnTheServiceThreadWhileConnectionsKeepWorking() throws {
        let server = try TestServer()
        let (a, aID) = try server.connect()
        let (b, bID) = try server.connect()
        let handle = server.handle
        server.handle.perform { delegate in
            (delegate as? EchoDelegate)?.control.record(.performed(onServiceThread: handle.isServiceThread))
        }
        #expect(server.control.wait { server.control.events.contains(.performed(onServiceThread: true)) })
        try a.sendText("still")
        #expect(try a.receive() == .text("still"))
        for id in [aID, bID] {
            server.handle.send(id, .text(#"{"type":"final"}"#))
            server.handle.close(id, code: 1001, reason: "shutting_down")
        }
        for c in [a, b] {
            let (messages, close) = try c.receiveUntilClose()
            #expect(messages == [.text(#"{"type":"final"}"#)])
            #expect(close == .close(code: 1001, reason: "shutting_down"))
        }
        #expect(server.control.wait { server.handle.connectionCount == 0 })
        server.stop()
        #expect(server.control.events.filter { if case .closed = $0 { true } else { false } }.count == 2)
    }
}
