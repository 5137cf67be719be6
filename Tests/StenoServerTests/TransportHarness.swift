import Foundation
import StenoCore
import Synchronization
import Testing
@testable import StenoServer
import StenoTestSupport

/// What the test delegate saw, readable from the test's thread.
enum TransportEvent: Equatable, Sendable {
    case opened(ConnectionID, UpgradeRequest)
    case received(ConnectionID, IncomingMessage)
    case tooLarge(ConnectionID)
    case closed(ConnectionID)
    case drainingStarted
}

/// Shared between the test (any thread) and the delegate (lws thread).
final class TestControl: Sendable {
    struct Settings: Sendable {
        var echo = true
        var capacity = Int.max
        var policy = HandshakePolicy(paths: ["/v1/stream", "/v1/listen"])
        var routes: [String: HTTPResponse] = [:]
        /// Pause reading as soon as a connection opens.
        var pauseOnOpen = false
        /// Pause reading from inside `received` once a connection got this many messages.
        var pauseAfter: Int?
    }

    let settings: Mutex<Settings>
    private let log = Mutex<[TransportEvent]>([])
    private let ticks = Atomic<Int>(0)
    let logLines = Mutex<[String]>([])

    init(_ settings: Settings) { self.settings = Mutex(settings) }

    func record(_ e: TransportEvent) { log.withLock { $0.append(e) } }
    func tick() { ticks.add(1, ordering: .relaxed) }
    var tickCount: Int { ticks.load(ordering: .relaxed) }
    var events: [TransportEvent] { log.withLock { $0 } }

    var openedIDs: [ConnectionID] {
        events.compactMap { if case .opened(let id, _) = $0 { id } else { nil } }
    }

    func received(_ id: ConnectionID) -> [IncomingMessage] {
        events.compactMap { if case .received(id, let m) = $0 { m } else { nil } }
    }

    func wasClosed(_ id: ConnectionID) -> Bool { events.contains(.closed(id)) }

    /// Polls until `condition` holds; false if it did not within `timeout` (a guard
    /// against hanging, not a timing assertion).
    @discardableResult
    func wait(timeout: Double = 10, _ condition: () -> Bool) -> Bool {
        let deadline = Deadline(timeout)
        while !condition() {
            if deadline.hasPassed { return false }
            usleep(2000)
        }
        return true
    }

    /// Waits for the `n`-th connection to open and returns its id.
    func awaitOpened(count n: Int = 1, timeout: Double = 10) throws -> ConnectionID {
        guard wait(timeout: timeout, { openedIDs.count >= n }) else {
            throw TestClientError.timeout("waiting for connection \(n) to open")
        }
        return openedIDs[n - 1]
    }
}

/// Echoes messages back, records everything, and decides upgrades with a
/// `HandshakePolicy`.
final class EchoDelegate: TransportDelegate {
    let handle: TransportHandle
    let control: TestControl
    private var open = 0
    private var receivedCount: [ConnectionID: Int] = [:]

    init(handle: TransportHandle, control: TestControl) {
        self.handle = handle
        self.control = control
    }

    func decideUpgrade(_ request: UpgradeRequest) -> UpgradeDecision {
        let s = control.settings.withLock { $0 }
        return s.policy.evaluate(request, hasCapacity: open < s.capacity)
    }

    func opened(_ id: ConnectionID, request: UpgradeRequest) {
        open += 1
        control.record(.opened(id, request))
        if control.settings.withLock({ $0.pauseOnOpen }) { handle.setReading(id, false) }
    }

    func received(_ id: ConnectionID, _ message: IncomingMessage) {
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

    func tooLarge(_ id: ConnectionID, limit: Int) {
        control.record(.tooLarge(id))
        handle.send(id, .text(#"{"type":"error","code":"too_large"}"#))
        handle.close(id, code: 1009, reason: "too_large")
    }

    func closed(_ id: ConnectionID) {
        open -= 1
        control.record(.closed(id))
    }

    func http(_ request: HTTPRequest) -> HTTPResponse? {
        control.settings.withLock { $0.routes[request.path] }
    }

    func tick() { control.tick() }

    func drainingStarted() { control.record(.drainingStarted) }
}

/// A transport with an `EchoDelegate`, listening on 127.0.0.1 port 0.
final class TestServer {
    let transport: WebSocketTransport
    let control: TestControl
    let port: Int
    var handle: TransportHandle { transport.handle }

    init(_ settings: TestControl.Settings = .init(), configure: (inout TransportConfiguration) -> Void = { _ in }) throws {
        let control = TestControl(settings)
        var config = TransportConfiguration()
        config.host = "127.0.0.1"
        config.port = 0
        config.log = { level, line in control.logLines.withLock { $0.append("\(level): \(line)") } }
        configure(&config)
        transport = WebSocketTransport(configuration: config)
        self.control = control
        port = try transport.start(delegate: EchoDelegate(handle: transport.handle, control: control))
    }

    func stop() { transport.stop() }

    deinit { transport.stop() }

    /// A client connected to `path`, and the server-side id of its connection.
    func connect(path: String = "/v1/stream", headers: [(String, String)] = [], receiveBufferSize: Int? = nil,
                 sendBufferSize: Int? = nil, tls: Bool = false) throws -> (WebSocketTestClient, ConnectionID) {
        let before = control.openedIDs.count
        let client = try WebSocketTestClient.connect(port: port, path: path, headers: headers, tls: tls,
                                                     receiveBufferSize: receiveBufferSize, sendBufferSize: sendBufferSize)
        let id = try control.awaitOpened(count: before + 1)
        return (client, id)
    }
}
