import CLibWebSockets
import CLwsShims
import Foundation
import StenoCore
import StenoSystem
import Synchronization

/// Settings of one client connection.
public struct WebSocketClientConfiguration: Sendable {
    /// Where to connect (`wss://` for TLS).
    public var url: WebSocketURL
    /// Extra request headers, e.g. `("Authorization", "Bearer T")`.
    public var headers: [WebSocketHeader] = []
    /// PEM file of the certificate authorities to trust for `wss://` instead of the system's
    /// (a self-signed server certificate is its own authority). The server's name is checked
    /// against its certificate either way.
    public var caFile: String?
    /// Largest incoming message (all fragments together), in bytes; a bigger one closes the
    /// connection with 1009.
    public var maxMessageSize = 1 << 20
    /// How long connecting and the handshake may take, in seconds.
    public var connectTimeoutSeconds = 10
    /// Seconds after the server was last heard from at which libwebsockets pings it; it
    /// hangs up on one silent for twice that plus 10 s. 0: never.
    public var keepAliveSeconds = 0
    /// After `close(…)`, how long queued messages and the closing handshake may take before
    /// the connection is cut, in seconds.
    public var closeTimeoutSeconds = 10
    /// Where the client, and libwebsockets at warning and error level, log.
    public var log = Log()

    public init(url: WebSocketURL) {
        self.url = url
    }
}

/// One request header.
public struct WebSocketHeader: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// What happens to a client connection, in order: `opened`, then messages, then exactly one
/// of `closed`, `refused` or `failed`, after which nothing more comes.
public enum WebSocketClientEvent: Sendable, Equatable {
    /// The handshake completed (101).
    case opened
    /// A complete message (fragments joined).
    case message(IncomingMessage)
    /// The WebSocket ended. `code` is the peer's close code when it closed first
    /// (`byPeer`), the one this side sent when it did, and nil when the connection dropped
    /// without a close frame. `reason` is the close frame's reason text.
    case closed(code: UInt16?, reason: String, byPeer: Bool)
    /// The server answered the handshake with this HTTP status instead of 101 (401, 403,
    /// 503 …), and its `Retry-After` in seconds when it sent one.
    case refused(status: Int, retryAfter: Int?)
    /// Connecting failed before any HTTP answer: no route, refused, TLS, timeout; or the
    /// connection dropped during the handshake.
    case failed(String)

    /// Whether nothing comes after this event.
    public var isFinal: Bool {
        switch self {
        case .opened, .message: false
        case .closed, .refused, .failed: true
        }
    }
}

/// A libwebsockets WebSocket client: one connection, on a context and service thread of its
/// own, which end when the connection does. Connect again with a new client.
///
/// ```swift
/// let client = WebSocketClient(configuration: WebSocketClientConfiguration(url: url))
/// try client.connect { event in … }   // on the service thread; must not block
/// client.send(.text(#"{"type":"start",…}"#))
/// client.close(code: 1000)
/// client.waitUntilFinished()
/// ```
///
/// As in the server, only the service thread touches the `wsi`: `send` and `close` may be
/// called from any thread (and before the connection is open: messages wait for it); they
/// change state under a lock and wake the service thread with `lws_cancel_service`.
public final class WebSocketClient: @unchecked Sendable {
    public let configuration: WebSocketClientConfiguration

    // Shared between callers and the service thread, under the lock.
    struct Shared {
        var outbound: [OutgoingMessage] = []
        var queuedBytes = 0
        /// A close was asked for: sent once the queue is written.
        var closeRequest: (code: UInt16, reason: String)?
        /// The connection must be dropped now.
        var dropRequested = false
        var context: LwsContextRef?
        var started = false
        var finished = false
        /// A wake-up is pending: the service thread will look at the state.
        var wakePending = false
        /// `name=value` of each `Set-Cookie` of the handshake's 101.
        var cookies: [String] = []
    }
    let shared = Locked(Shared())
    private let done = DispatchSemaphore(value: 0)
    let serviceThread = Atomic<UInt>(0)

    // The service thread's own (never touched elsewhere once `connect` started it).
    var handler: (@Sendable (WebSocketClientEvent) -> Void)?
    var wsi: OpaquePointer?
    var assembler: MessageAssembler
    var isOpen = false
    var terminalDelivered = false
    var peerClose: (code: UInt16?, reason: String)?
    var sentClose: (code: UInt16, reason: String)?
    var lastConfirmed: ContinuousClock.Instant?
    let storage = LwsClientStorage()

    public init(configuration: WebSocketClientConfiguration) {
        self.configuration = configuration
        assembler = MessageAssembler(limit: configuration.maxMessageSize)
    }

    public enum ConnectError: Error, Equatable, CustomStringConvertible {
        case alreadyConnected
        public var description: String { "this client was already connected; make a new one" }
    }

    /// Starts connecting on a new service thread; `handler` gets every event, on that
    /// thread, and must not block (it holds up the connection).
    public func connect(_ handler: @escaping @Sendable (WebSocketClientEvent) -> Void) throws(ConnectError) {
        let first = shared.withLock { s in
            defer { s.started = true }
            return !s.started
        }
        guard first else { throw .alreadyConnected }
        self.handler = handler
        // lws logging is process-wide: a client does not take it over from a server in the
        // same process.
        if lwsLogSink.withLock({ $0 == nil }) { installLwsLogging(configuration.log) }
        let thread = Thread { [self] in
            serviceThread.store(UInt(pthread_self()), ordering: .releasing)
            serve()
            serviceThread.store(0, ordering: .releasing)
            let dropped = shared.withLock { s -> [OutgoingMessage] in
                s.finished = true
                s.context = nil
                let d = s.outbound
                s.outbound = []
                s.queuedBytes = 0
                return d
            }
            _ = dropped
            self.handler = nil
            done.signal()
        }
        thread.name = "steno-lws-client"
        thread.start()
    }

    /// Queues a message; false when the connection is closing or over (nothing queued).
    /// Messages leave in the order they were queued, once the connection is open.
    @discardableResult
    public func send(_ message: OutgoingMessage) -> Bool {
        let wake = !isServiceThread
        return shared.withLock { s in
            guard !s.finished, s.closeRequest == nil, !s.dropRequested else { return false }
            s.outbound.append(message)
            s.queuedBytes += message.byteCount
            Self.wake(&s, wake)
            return true
        }
    }

    /// The cookies the server (or a proxy before it) set in its handshake answer, as
    /// `name=value` (their attributes left out), once `opened` has come. A load balancer's
    /// cookie is how a reconnection finds the instance that holds its session.
    public var cookies: [String] { shared.withLock { $0.cookies } }

    /// Bytes queued and not yet handed to the socket.
    public var queuedBytes: Int { shared.withLock { $0.queuedBytes } }

    /// Closes with `code` and `reason` once what is queued was written; the `closed` event
    /// follows when the server answered (or `closeTimeoutSeconds` passed).
    public func close(code: UInt16 = 1000, reason: String = "") {
        let wake = !isServiceThread
        let code = TransportHandle.mayBeSent(code) ? code : 1000
        shared.withLock { s in
            guard !s.finished, s.closeRequest == nil else { return }
            s.closeRequest = (code, reason)
            Self.wake(&s, wake)
        }
    }

    /// Drops the connection at once, without a closing handshake, and waits for the service
    /// thread to end (from the service thread itself it cannot wait: the thread ends after the
    /// current callback).
    public func disconnect() {
        let wake = !isServiceThread
        let started = shared.withLock { s -> Bool in
            s.dropRequested = true
            s.outbound = []
            s.queuedBytes = 0
            Self.wake(&s, wake)
            return s.started
        }
        if started && wake { waitUntilFinished() }
    }

    /// Waits until the connection is over and its thread has ended; false if `timeout`
    /// (seconds) passed first.
    @discardableResult
    public func waitUntilFinished(timeout: Double? = nil) -> Bool {
        let started = shared.withLock { $0.started }
        guard started else { return true }
        if let timeout {
            guard done.wait(timeout: .now() + timeout) == .success else { return false }
        } else {
            done.wait()
        }
        done.signal()  // later waiters pass too
        return true
    }

    /// Whether the connection is over (its final event was delivered).
    public var isFinished: Bool { shared.withLock { $0.finished } }

    var isServiceThread: Bool {
        let t = serviceThread.load(ordering: .acquiring)
        return t != 0 && pthread_equal(pthread_t(t), pthread_self()) != 0
    }

    private static func wake(_ s: inout Shared, _ wake: Bool) {
        if s.wakePending { return }
        if !wake {
            // On the service thread: it looks at the state when the callback returns.
            s.wakePending = true
        } else if let c = s.context {
            lws_cancel_service(c.pointer)
            s.wakePending = true
        }
        // Not started yet: the service thread looks at the state once connected.
    }
}
