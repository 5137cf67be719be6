import Foundation
import StenoCore
import StenoSystem
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

/// Opens descriptors while the server stops (from `closed`, which lws calls while it
/// destroys its context), as any other thread of the process might meanwhile.
private final class OpensFilesWhenClosed: TransportDelegate {
    let opened = Locked<[Int32]>([])
    func decideUpgrade(_ request: UpgradeRequest) -> UpgradeDecision { .accept }
    func opened(_ id: ConnectionID, request: UpgradeRequest) {}
    func received(_ id: ConnectionID, _ message: IncomingMessage) {}
    func closed(_ id: ConnectionID, backlog: OutboundBacklog?) {
        let fds = (0..<64).map { _ in open("/dev/null", O_RDONLY | O_CLOEXEC) }
        opened.withLock { $0 += fds }
    }
}

/// Does nothing; a test watches when it is freed.
private final class IdleDelegate: TransportDelegate {
    func decideUpgrade(_ request: UpgradeRequest) -> UpgradeDecision { .accept }
    func opened(_ id: ConnectionID, request: UpgradeRequest) {}
    func received(_ id: ConnectionID, _ message: IncomingMessage) {}
    func closed(_ id: ConnectionID, backlog: OutboundBacklog?) {}
}

@Suite struct TransportTeardownTests {
    /// Once `stop` returns, the service thread holds nothing of the delegate's: the caller's
    /// last reference frees it there and then. (Foundation released the thread's closure, and
    /// with it the loop and the delegate, only as the thread exited: `steno serve` freed its
    /// engine on that thread while the main one ran `exit`, and crashed now and then in
    /// onnxruntime's teardown.)
    @Test func stoppingLetsGoOfTheDelegate() throws {
        var config = TransportConfiguration(host: "127.0.0.1", port: 0, maxMessageSize: 65536, outboundByteLimit: 65536)
        config.log = .silent
        let transport = WebSocketTransport(configuration: config)
        weak var held: IdleDelegate?
        do {
            let delegate = IdleDelegate()
            held = delegate
            let port = try transport.start(delegate: delegate)
            try WebSocketTestClient.connect(port: port).disconnect()
        }
        transport.stop()
        #expect(held == nil)
    }

    /// lws 4.1.6 on libuv closes its event pipe once while it destroys the context and
    /// again on the loop's next turn; a descriptor opened in between (here, by the delegate,
    /// while lws closes the connections after the pipe) got the pipe's number and was closed
    /// under its owner. Every descriptor opened while the server stopped is still open after.
    @Test(arguments: EventLoop.allCases.filter(\.isAvailable))
    func stoppingClosesOnlyTheServersOwnDescriptors(_ loop: EventLoop) throws {
        var config = TransportConfiguration(host: "127.0.0.1", port: 0, maxMessageSize: 65536, outboundByteLimit: 65536)
        config.eventLoop = loop
        config.log = .silent
        let transport = WebSocketTransport(configuration: config)
        let delegate = OpensFilesWhenClosed()
        let port = try transport.start(delegate: delegate)
        let clients = try (0..<3).map { _ in try WebSocketTestClient.connect(port: port) }
        #expect(TestControl(.init()).wait { transport.handle.connectionCount == clients.count })
        transport.stop()
        let fds = delegate.opened.withLock { $0 }
        #expect(fds.count == 3 * 64 && fds.allSatisfy { $0 >= 0 })
        let closedUnderUs = fds.filter { fcntl($0, F_GETFD) == -1 }
        #expect(closedUnderUs.isEmpty, "closed by the server: \(closedUnderUs)")
        for fd in fds where fd >= 0 { close(fd) }
        for client in clients { client.disconnect() }
    }
}

@Suite struct TransportManyClosesTests {
    /// The transport runs a few hundred closing handshakes at a time (lws's timeouts cost
    /// O(handshakes under way) each): more than that closed at once all still get their close
    /// frame, with its code, on each loop.
    @Test(arguments: EventLoop.allCases.filter(\.isAvailable))
    func manyClosedAtOnceEachGetTheirCloseFrame(_ loop: EventLoop) throws {
        let server = try TestServer { $0.eventLoop = loop }
        let count = ServiceLoop.closingHandshakesAtOnce * 2 + 10
        var clients: [WebSocketTestClient] = []
        for _ in 0..<count { clients.append(try WebSocketTestClient.connect(port: server.port, timeout: 30)) }
        #expect(server.control.wait(timeout: 30) { server.control.openedIDs.count == count })
        for id in server.control.openedIDs { server.handle.close(id, code: 4001, reason: "all at once") }
        var closes: [String: Int] = [:]
        for client in clients {
            let (_, close) = try client.receiveUntilClose(timeout: 30)
            closes["\(close.map { "\($0)" } ?? "none")", default: 0] += 1
        }
        #expect(closes == ["\(WebSocketTestClient.Message.close(code: 4001, reason: "all at once"))": count])
        #expect(server.control.wait(timeout: 30) { server.handle.connectionCount == 0 })
        server.stop()
    }

    /// A connection whose queue has flushed waits for a free closing handshake, however long
    /// that takes: here the first `closingHandshakesAtOnce` peers never answer their close
    /// frames (lws waits 5 s for each), far longer than the flush timeout. The ones behind
    /// them used to be cut at that timeout, as if they did not read: in a drain of 10,000
    /// sessions, the last thousand got no close frame.
    @Test(arguments: EventLoop.allCases.filter(\.isAvailable))
    func waitingForAClosingHandshakeIsNotAFlushThatTimedOut(_ loop: EventLoop) throws {
        let server = try TestServer {
            $0.eventLoop = loop
            $0.closeFlushTimeout = 0.5
        }
        let count = ServiceLoop.closingHandshakesAtOnce + 20
        var clients: [WebSocketTestClient] = []
        for _ in 0..<count {
            let client = try WebSocketTestClient.connect(port: server.port, timeout: 30)
            client.autoCloseReply = false
            clients.append(client)
        }
        #expect(server.control.wait(timeout: 30) { server.control.openedIDs.count == count })
        for id in server.control.openedIDs { server.handle.close(id, code: 4001, reason: "in turn") }
        var closes: [String: Int] = [:]
        for client in clients {
            let (_, close) = try client.receiveUntilClose(timeout: 40)
            closes["\(close.map { "\($0)" } ?? "none")", default: 0] += 1
        }
        #expect(closes == ["\(WebSocketTestClient.Message.close(code: 4001, reason: "in turn"))": count])
        server.stop()
    }
}

@Suite struct TransportKeepAliveTests {
    /// A peer whose reading the server paused (flow control) cannot show it is there: what it
    /// sends waits unread. The keepalive leaves it alone while paused, and counts again from
    /// when reading resumes: a peer that answers nothing is hung up on then.
    @Test func aPausedConnectionIsNotHungUpOnUntilReadingResumes() throws {
        var settings = TestControl.Settings()
        settings.pauseOnOpen = true
        let server = try TestServer(settings) { $0.keepAliveSeconds = 1 }
        let (client, id) = try server.connect()
        client.autoPong = false
        // Past the hang-up time (twice 1 s plus 10 s) with reading paused: still open.
        let deadline = Deadline(14)
        while !deadline.hasPassed {
            do { _ = try client.receive(timeout: 0.5) } catch TestClientError.timeout {}
        }
        #expect(!server.control.wasClosed(id))
        server.handle.setReading(id, true)
        #expect(server.control.wait(timeout: 60) { server.control.wasClosed(id) })
        #expect(server.control.logLines.withLock { $0 }.contains { $0.contains("connection \(id) silent for") })
    }
}
