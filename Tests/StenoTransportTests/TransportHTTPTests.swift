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
