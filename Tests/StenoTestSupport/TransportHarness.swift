import Foundation
import StenoCore
import StenoSystem
import Synchronization
import StenoTransport

// A libwebsockets transport with a recording, echoing delegate, for tests of the transport
// and of what the service puts on top of it (handshake policy, static files).

/// What the test delegate saw, readable from the test's thread.
public enum TransportEvent: Equatable, Sendable {
    case opened(ConnectionID, UpgradeRequest)
    case received(ConnectionID, IncomingMessage)
    case tooLarge(ConnectionID)
    case closed(ConnectionID)
    /// A `TransportHandle.perform` body ran on the service thread.
    case performed(onServiceThread: Bool)
}

/// Shared between the test (any thread) and the delegate (lws thread).
public final class TestControl: Sendable {
    public struct Settings: Sendable {
        public var echo = true
        public var capacity = Int.max
        /// The upgrade decision, given whether one more connection fits under `capacity`.
        /// By default `/v1/stream` and `/v1/listen` are accepted (503 at capacity), the rest 404.
        public var decide: @Sendable (UpgradeRequest, _ hasCapacity: Bool) -> UpgradeDecision = { request, hasCapacity in
            guard ["/v1/stream", "/v1/listen"].contains(request.path) else { return .reject(status: 404) }
            return hasCapacity ? .accept : .reject(status: 503, headers: [("Retry-After", "5")])
        }
        public var routes: [String: HTTPResponse] = [:]
        /// Answers GET/HEAD requests that no route takes (e.g. static files).
        public var files: (@Sendable (String) -> HTTPResponse?)?
        /// Answers POSTs (their whole body, the exchange to answer later through the handle);
        /// nil: the transport's default (405).
        public var post: (@Sendable (HTTPRequest, [UInt8], HTTPExchange, TransportHandle) -> HTTPResponse?)?
        /// Pause reading as soon as a connection opens.
        public var pauseOnOpen = false
        /// Pause reading from inside `received` once a connection got this many messages.
        public var pauseAfter: Int?

        public init() {}
    }

    public let settings: Locked<Settings>
    private let log = Locked<[TransportEvent]>([])
    private let ticks = Atomic<Int>(0)
    public let logLines = Locked<[String]>([])
    /// What closed connections that kept their written messages left behind.
    public let backlogs = Locked<[ConnectionID: OutboundBacklog]>([:])

    public init(_ settings: Settings) { self.settings = Locked(settings) }

    public func record(_ e: TransportEvent) { log.withLock { $0.append(e) } }
    public func tick() { ticks.add(1, ordering: .relaxed) }
    public var tickCount: Int { ticks.load(ordering: .relaxed) }
    public var events: [TransportEvent] { log.withLock { $0 } }

    public var openedIDs: [ConnectionID] {
        events.compactMap { if case .opened(let id, _) = $0 { id } else { nil } }
    }

    public func received(_ id: ConnectionID) -> [IncomingMessage] {
        events.compactMap { if case .received(id, let m) = $0 { m } else { nil } }
    }

    public func wasClosed(_ id: ConnectionID) -> Bool { events.contains(.closed(id)) }

    /// Polls until `condition` holds; false if it did not within `timeout` (a guard
    /// against hanging, not a timing assertion).
    @discardableResult
    public func wait(timeout: Double = 10, _ condition: () -> Bool) -> Bool {
        let deadline = Deadline(timeout)
        while !condition() {
            if deadline.hasPassed { return false }
            usleep(2000)
        }
        return true
    }

    /// Waits for the `n`-th connection to open and returns its id.
    public func awaitOpened(count n: Int = 1, timeout: Double = 10) throws -> ConnectionID {
        guard wait(timeout: timeout, { openedIDs.count >= n }) else {
            throw TestClientError.timeout("waiting for connection \(n) to open")
        }
        return openedIDs[n - 1]
    }
}

/// Echoes messages back, records everything, and decides upgrades with a
/// `HandshakePolicy`.
public final class EchoDelegate: TransportDelegate {
    public let handle: TransportHandle
    public let control: TestControl
    private var open = 0
    private var receivedCount: [ConnectionID: Int] = [:]

    public init(handle: TransportHandle, control: TestControl) {
        self.handle = handle
        self.control = control
    }

    public func decideUpgrade(_ request: UpgradeRequest) -> UpgradeDecision {
        let s = control.settings.withLock { $0 }
        return s.decide(request, open < s.capacity)
    }

    public func opened(_ id: ConnectionID, request: UpgradeRequest) {
        open += 1
        control.record(.opened(id, request))
        if control.settings.withLock({ $0.pauseOnOpen }) { handle.setReading(id, false) }
    }

    public func received(_ id: ConnectionID, _ message: IncomingMessage) {
        control.record(.received(id, message))
        receivedCount[id, default: 0] += 1
        let settings = control.settings.withLock { $0 }
        if let n = settings.pauseAfter, receivedCount[id] == n { handle.setReading(id, false) }
        guard settings.echo else { return }
        let reply: OutgoingMessage
        switch message {
        case .text(let t): reply = .text(t)
        case .binary(let b): reply = .binary(b)
        }
        if handle.send(id, reply) == .overflow {
            handle.close(id, code: 4008, reason: "slow_consumer", discardQueued: true)
        }
    }

    public func tooLarge(_ id: ConnectionID, limit: Int) {
        control.record(.tooLarge(id))
        handle.send(id, .text(#"{"type":"error","code":"too_large"}"#))
        handle.close(id, code: 1009, reason: "too_large")
    }

    public func closed(_ id: ConnectionID, backlog: OutboundBacklog?) {
        if let backlog { control.backlogs.withLock { $0[id] = backlog } }
        open -= 1
        control.record(.closed(id))
    }

    public func http(_ request: HTTPRequest) -> HTTPResponse? {
        let s = control.settings.withLock { $0 }
        return s.routes[request.path] ?? s.files?(request.path)
    }

    public func http(_ request: HTTPRequest, body: [UInt8], exchange: HTTPExchange) -> HTTPResponse? {
        guard let post = control.settings.withLock({ $0.post }) else {
            return .plain(status: 405, headers: [("Allow", "GET, HEAD")])
        }
        return post(request, body, exchange, handle)
    }

    public func tick() { control.tick() }

}

/// A transport with an `EchoDelegate`, listening on 127.0.0.1 port 0.
public final class TestServer {
    public let transport: WebSocketTransport
    public let control: TestControl
    public let port: Int
    public var handle: TransportHandle { transport.handle }

    public init(_ settings: TestControl.Settings = .init(), configure: (inout TransportConfiguration) -> Void = { _ in }) throws {
        let control = TestControl(settings)
        var config = TransportConfiguration(host: "127.0.0.1", port: 0, maxMessageSize: 64 * 1024,
                                            outboundByteLimit: 1 << 20)
        config.log = Log(minimum: .debug, sink: { line in control.logLines.withLock { $0.append(line) } })
        configure(&config)
        transport = WebSocketTransport(configuration: config)
        self.control = control
        port = try transport.start(delegate: EchoDelegate(handle: transport.handle, control: control))
    }

    public func stop() { transport.stop() }

    deinit { transport.stop() }

    /// A client connected to `path`, and the server-side id of its connection.
    public func connect(path: String = "/v1/stream", headers: [(String, String)] = [], receiveBufferSize: Int? = nil,
                 sendBufferSize: Int? = nil, tls: Bool = false, source: String? = nil) throws -> (WebSocketTestClient, ConnectionID) {
        let before = control.openedIDs.count
        let client = try WebSocketTestClient.connect(port: port, path: path, headers: headers, tls: tls,
                                                     receiveBufferSize: receiveBufferSize, sendBufferSize: sendBufferSize,
                                                     source: source)
        let id = try control.awaitOpened(count: before + 1)
        return (client, id)
    }
}
