import Foundation
import StenoCore
import StenoSystem
import StenoTestSupport
import Testing
@testable import StenoTransport

/// What a client saw, for the test's thread to wait on.
final class ClientEvents: Sendable {
    private let events = Locked<[WebSocketClientEvent]>([])

    func append(_ event: WebSocketClientEvent) { events.withLock { $0.append(event) } }
    var all: [WebSocketClientEvent] { events.withLock { $0 } }
    var messages: [IncomingMessage] { all.compactMap { if case .message(let m) = $0 { m } else { nil } } }
    var last: WebSocketClientEvent? { all.last }

    /// Waits for the final event (a guard against hanging, not a timing assertion).
    func waitForEnd(timeout: Double = 20) throws -> WebSocketClientEvent {
        try wait(timeout: timeout) { $0.last?.isFinal == true }
        return last!
    }

    func wait(timeout: Double = 20, _ condition: ([WebSocketClientEvent]) -> Bool) throws {
        let deadline = Deadline(timeout)
        while !condition(all) {
            if deadline.hasPassed { throw TestClientError.timeout("client events: \(all)") }
            usleep(2000)
        }
    }
}

@Suite struct WebSocketClientTests {
    static func client(port: Int, secure: Bool = false, path: String = "/v1/stream",
                       configure: (inout WebSocketClientConfiguration) -> Void = { _ in }) throws -> (WebSocketClient, ClientEvents) {
        var configuration = WebSocketClientConfiguration(url: WebSocketURL(secure: secure, host: "127.0.0.1", port: port, path: path))
        configuration.log = .silent
        configuration.connectTimeoutSeconds = 5
        configure(&configuration)
        let client = WebSocketClient(configuration: configuration)
        let events = ClientEvents()
        try client.connect { events.append($0) }
        return (client, events)
    }

    @Test func textBinaryHeadersAndAClientClose() throws {
        let server = try TestServer()
        let (client, events) = try Self.client(port: server.port, path: "/v1/stream?x=1") {
            $0.headers = [WebSocketHeader("Authorization", "Bearer s3cret")]
        }
        // Sent before the connection is open: it waits for it.
        #expect(client.send(.text("hello")))
        // Bigger than a receive piece (16 KB) on either side: joined from fragments.
        let big = (0..<60_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        #expect(client.send(.binary(big)))
        try events.wait { $0.count >= 3 }
        #expect(events.all.first == .opened)
        let echoed = events.messages == [.text("hello"), .binary(big)]  // (not printed: it is big)
        #expect(echoed)
        let id = try server.control.awaitOpened()
        guard case .opened(_, let request)? = server.control.events.first else { Issue.record("not opened"); return }
        #expect(request.headers["authorization"] == "Bearer s3cret")
        #expect(request.queryValue("x") == "1")

        client.close(code: 1000, reason: "done")
        #expect(try events.waitForEnd() == .closed(code: 1000, reason: "done", byPeer: false))
        #expect(server.control.wait { server.control.wasClosed(id) })
        #expect(client.waitUntilFinished(timeout: 10))
        #expect(!client.send(.text("late")))
    }

    @Test func aServerCloseArrivesWithItsCodeAndReason() throws {
        let server = try TestServer()
        let (client, events) = try Self.client(port: server.port)
        let id = try server.control.awaitOpened()
        server.handle.send(id, .text(#"{"type":"error","code":"resume_failed"}"#))
        server.handle.close(id, code: 4404, reason: "resume_failed")
        #expect(try events.waitForEnd() == .closed(code: 4404, reason: "resume_failed", byPeer: true))
        #expect(events.messages == [.text(#"{"type":"error","code":"resume_failed"}"#)])
        client.waitUntilFinished()
    }

    @Test(arguments: [401, 403, 503])
    func aRefusedHandshakeGivesItsStatus(status: Int) throws {
        var settings = TestControl.Settings()
        settings.decide = { _, _ in .reject(status: status, headers: status == 503 ? [("Retry-After", "7")] : []) }
        let server = try TestServer(settings)
        let (client, events) = try Self.client(port: server.port)
        #expect(try events.waitForEnd() == .refused(status: status, retryAfter: status == 503 ? 7 : nil))
        #expect(events.all.count == 1)
        client.waitUntilFinished()
    }

    @Test func nobodyListeningIsAFailure() throws {
        // A port that was free a moment ago.
        let port = try { () throws -> Int in
            let server = try TestServer()
            defer { server.stop() }
            return server.port
        }()
        let (client, events) = try Self.client(port: port)
        guard case .failed = try events.waitForEnd() else {
            Issue.record("expected a failure, got \(events.all)")
            return
        }
        client.waitUntilFinished()
    }

    @Test func aMessageOverTheLimitClosesWith1009() throws {
        let server = try TestServer()
        let (client, events) = try Self.client(port: server.port) { $0.maxMessageSize = 1000 }
        let id = try server.control.awaitOpened()
        server.handle.send(id, .binary([UInt8](repeating: 7, count: 5000)))
        #expect(try events.waitForEnd() == .closed(code: 1009, reason: "too_large", byPeer: false))
        client.waitUntilFinished()
    }

    @Test func disconnectDropsAtOnce() throws {
        let server = try TestServer()
        let (client, events) = try Self.client(port: server.port)
        let id = try server.control.awaitOpened()
        client.disconnect()
        #expect(client.isFinished)
        #expect(events.last?.isFinal == true)
        #expect(server.control.wait { server.control.wasClosed(id) })
    }

    static let pressingMessages = 256

    /// A server that reads nothing from its connection (from its opening on) and a client with
    /// a 1 s keepalive that has sent it more than the socket buffers on both sides take: the
    /// rest waits in the client.
    static func heldBack() throws -> (TestServer, ConnectionID, WebSocketClient, ClientEvents) {
        var settings = TestControl.Settings()
        settings.pauseOnOpen = true
        settings.echo = false
        let server = try TestServer(settings)
        let (client, events) = try Self.client(port: server.port) { $0.keepAliveSeconds = 1 }
        let id = try server.control.awaitOpened()
        try events.wait { $0.first == .opened }
        let piece = [UInt8](repeating: 0x5a, count: 32 * 1024)
        for _ in 0..<pressingMessages { #expect(client.send(.binary(piece))) }
        return (server, id, client, events)
    }

    /// A server that holds the client's writes back (flow control: it stopped reading, so its
    /// TCP window is closed) and has nothing to say is behind, not gone: the client's ping
    /// waits behind what the server has not read, so no pong can come. The keepalive leaves it
    /// alone while held back and pinged by the server (every 5 s), here past twice its hang-up
    /// time (twice 1 s plus 10 s: the server's pings are what keep it, see the hung server
    /// below), and the connection carries on once the server reads again. (`steno send
    /// --fast` against a server whose session waited for a decoder was hung up on after 50 s.)
    @Test func aServerHoldingTheClientBackIsNotTakenForGoneByTheKeepalive() throws {
        let (server, id, client, events) = try Self.heldBack()
        let deadline = Deadline(26)
        while !deadline.hasPassed && events.last?.isFinal != true { usleep(50_000) }
        try #require(events.all == [.opened], "the client gave up on a server that held it back")
        #expect(client.queuedBytes > 0, "the server's window never closed: the test did not press")

        server.handle.setReading(id, true)
        #expect(server.control.wait(timeout: 30) { server.control.received(id).count == Self.pressingMessages })
        client.close(code: 1000, reason: "done")
        #expect(try events.waitForEnd() == .closed(code: 1000, reason: "done", byPeer: false))
        client.waitUntilFinished()
    }

    /// A hung server process is not "behind": its kernel still answers the window probes, but
    /// the server no longer pings the client it holds back (every 5 s, `ServiceLoop`), so the
    /// keepalive runs again once nothing has come for its hang-up time, and hangs up.
    @Test func aHungServerThatHoldsTheClientBackIsHungUpOn() throws {
        let (server, id, client, events) = try Self.heldBack()
        // Held back and pinged for a while: still open.
        usleep(6_000_000)
        #expect(events.all == [.opened] && client.queuedBytes > 0, "\(events.all)")
        // The service thread stops (as in a process that hangs); the kernel goes on.
        let hung = DispatchSemaphore(value: 0)
        server.handle.perform { _ in hung.wait() }
        defer {
            hung.signal()
            server.handle.setReading(id, true)
        }
        #expect(try events.waitForEnd(timeout: 60) == .closed(code: nil, reason: "", byPeer: false))
        client.waitUntilFinished()
    }

    /// The other side of the test above: a server that is silent while its TCP takes
    /// everything (window open: nothing holds the client back) is still taken for gone, after
    /// twice the keepalive plus 10 s, and the connection ends without a close code.
    @Test func aSilentServerWhoseWindowIsOpenIsHungUpOnByTheKeepalive() throws {
        let server = try TestServer()
        let proxy = try TCPProxy(targetPort: server.port)
        defer { proxy.stop() }
        let (client, events) = try Self.client(port: proxy.port) { $0.keepAliveSeconds = 1 }
        try events.wait { $0.first == .opened }
        proxy.mute(true)
        let started = ContinuousClock.now
        for _ in 0..<20 { client.send(.binary([UInt8](repeating: 1, count: 1000))) }
        #expect(try events.waitForEnd(timeout: 30) == .closed(code: nil, reason: "", byPeer: false))
        // Hung up on at 12 s (pinged at 1 s, then 10 s more than twice 1 s), not at once.
        let waited = ContinuousClock.now - started
        #expect(waited >= .seconds(11), "\(waited)")
        client.waitUntilFinished()
    }

    @Test func wssWithTheServersOwnCertificateAsAuthority() throws {
        let certificate = try TestCertificate()
        defer { certificate.remove() }
        let server = try TestServer { config in
            config.tlsCertificatePath = certificate.certificatePath
            config.tlsKeyPath = certificate.keyPath
        }
        let (client, events) = try Self.client(port: server.port, secure: true) { $0.caFile = certificate.certificatePath }
        client.send(.text("over tls"))
        try events.wait { $0.count >= 2 }
        #expect(events.messages == [.text("over tls")])
        client.close()
        #expect(try events.waitForEnd() == .closed(code: 1000, reason: "", byPeer: false))
        client.waitUntilFinished()

        // Without trusting it, the certificate does not verify; a missing CA file is an error.
        let (untrusting, refused) = try Self.client(port: server.port, secure: true) { $0.caFile = nil }
        guard case .failed = try refused.waitForEnd() else { Issue.record("\(refused.all)"); return }
        untrusting.waitUntilFinished()
        let (missing, noFile) = try Self.client(port: server.port, secure: true) { $0.caFile = "/nonexistent/ca.pem" }
        guard case .failed = try noFile.waitForEnd() else { Issue.record("\(noFile.all)"); return }
        missing.waitUntilFinished()
    }

    @Test func urls() {
        #expect(WebSocketURL("ws://127.0.0.1:8080") == WebSocketURL(secure: false, host: "127.0.0.1", port: 8080, path: "/"))
        #expect(WebSocketURL("wss://example.com/v1?a=b") == WebSocketURL(secure: true, host: "example.com", port: 443, path: "/v1?a=b"))
        #expect(WebSocketURL("ws://[::1]:9000/x")?.host == "::1")
        #expect(WebSocketURL("ws://[::1]:9000/x")?.hostHeader == "[::1]:9000")
        #expect(WebSocketURL("ws://h")?.hostHeader == "h")
        #expect(WebSocketURL("ws://h?q")?.path == "/?q")
        for bad in ["http://h", "ws://", "ws://h:0", "ws://h:99999", "ws://h:x", "ws://::1", "ws://u@h", "ws://a b", "h:80"] {
            #expect(WebSocketURL(bad) == nil, "\(bad)")
        }
    }
}
