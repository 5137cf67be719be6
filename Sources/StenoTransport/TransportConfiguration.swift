import CLwsShims
import Glibc
import StenoSystem

/// The event loop libwebsockets runs on.
public enum EventLoop: String, Sendable, CaseIterable, CustomStringConvertible {
    /// libuv (epoll on Linux), through Debian's `libwebsockets-evlib_uv.so` plugin, on a loop
    /// the transport owns: the cost of a wake-up depends on what happened, not on how many
    /// connections are open.
    case libuv
    /// lws's built-in loop: `poll()` over every socket at each wake-up, so each wake-up costs
    /// in proportion to the connections open.
    case poll

    public var description: String { rawValue }

    /// Where libwebsockets loads the loop's plugin from; nil for the built-in loop.
    public var pluginPath: String? {
        switch self {
        case .poll: nil
        case .libuv: String(cString: steno_lws_evlib_dir) + "/libwebsockets-evlib_uv.so"
        }
    }

    /// Whether the loop can run here (its plugin is installed).
    public var isAvailable: Bool {
        guard let path = pluginPath else { return true }
        return access(path, R_OK) == 0
    }
}

/// Settings of the WebSocket/HTTP transport.
public struct TransportConfiguration: Sendable {
    /// Address to listen on: an IPv4/IPv6 address, or `""`/`"0.0.0.0"`/`"::"` for all.
    public var host: String
    /// Port; 0 picks a free one (read it from `WebSocketTransport.start()`).
    public var port: Int
    /// PEM certificate and key paths; both set means TLS (wss/https).
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// Largest incoming message (all fragments together), in bytes.
    public var maxMessageSize: Int
    /// Largest amount of unsent outbound data per connection, in bytes.
    public var outboundByteLimit: Int
    /// How often the delegate's `tick()` runs, in seconds.
    public var tickInterval: Double = 0.25
    /// After `close(…)`, how long queued messages may take to flush before the
    /// connection is cut without a close frame, in seconds.
    public var closeFlushTimeout: Double = 10
    /// After a WebSocket is closed with bytes still unread from its peer or not yet delivered
    /// to it, how long the socket is kept open with its sending side shut, reading and
    /// discarding, so that the peer gets the close frame and a FIN rather than a reset
    /// (`LingeringCloses`), in seconds; it ends sooner when the peer closes. 0: never.
    public var closeLingerSeconds: Double = 10
    /// Seconds after a WebSocket was last heard from (a pong or any data) at which
    /// libwebsockets pings it; it hangs up on one silent for twice that plus 10 s. 0: never.
    public var keepAliveSeconds: Int = 0
    /// The event loop. libuv unless its plugin is missing, then poll (see `EventLoop`).
    public var eventLoop: EventLoop = EventLoop.libuv.isAvailable ? .libuv : .poll
    /// At start, raise the process's soft limit on open files to its hard limit: each
    /// connection is one descriptor, and libwebsockets sizes its tables from this limit when
    /// the context is made.
    public var raiseOpenFileLimit = true
    /// Largest request head Steno answers (the request line's URI and the values of the
    /// headers libwebsockets knows, cookies included): one over it gets 431. Browsers send up to
    /// 8–16 KB with a site's cookies. libwebsockets itself keeps `requestHeaderSlack` bytes more
    /// per connection while it reads a request head (for the header names it keeps and its own
    /// separators); a head that does not fit even there is cut without an answer (lws 4.1.6
    /// has no hook for it: docs/reliability.md).
    public var maxRequestHeaderBytes: Int = 16 * 1024
    /// The largest POST body taken (413 above it): OpenAI's limit on an uploaded file is
    /// 25 MB, and a multipart form adds a little.
    public var maxBodyBytes: Int = 26 * 1024 * 1024
    public static let requestHeaderSlack = 8 * 1024
    /// The buffer libwebsockets keeps per connection while it reads a request head.
    public var headBufferBytes: Int { max(4096, maxRequestHeaderBytes + Self.requestHeaderSlack) }
    /// Connections from one peer address that have not yet sent a whole first request head
    /// (slow or silent ones: slowloris), at most, at once: one more gets 429 and is closed
    /// before anything is read. 0: no limit. Browsers open a few at a time; a busy NAT's
    /// clients each finish theirs within a round trip.
    public var maxUnfinishedHeadsPerAddress = Self.defaultUnfinishedHeadsPerAddress
    public static let defaultUnfinishedHeadsPerAddress = 64
    /// Memory all unfinished first request heads may hold at once (`headBufferBytes` each):
    /// past it a new connection gets 503 and is closed. 0: no limit. 128 MB is 5,461 heads.
    public var unfinishedHeadsMemory = Self.defaultUnfinishedHeadsMemory
    public static let defaultUnfinishedHeadsMemory = 128 * 1024 * 1024
    /// Bytes all WebSocket messages still being assembled may hold at once (each is at most
    /// `maxMessageSize`): a connection whose next piece would go over is closed with 1013.
    /// 0: no limit.
    public var unfinishedMessagesMemory = Self.defaultUnfinishedMessagesMemory
    public static let defaultUnfinishedMessagesMemory = 64 * 1024 * 1024
    /// The same for one peer address's connections. 0: no limit.
    public var unfinishedMessagesPerAddress = Self.defaultUnfinishedMessagesPerAddress
    public static let defaultUnfinishedMessagesPerAddress = 4 * 1024 * 1024
    /// Peer addresses neither limit applies to: this machine (a local proxy, health checks,
    /// benchmarks), and proxies, whose clients all come from their address (and which read a
    /// request head whole before forwarding it).
    public var unlimitedAddresses: [String] = ["127.0.0.1", "::1"]
    /// A connection whose outbound data (queued, or held by libwebsockets after a partial
    /// write) has waited this many seconds with nothing written is reported to the delegate
    /// (`TransportDelegate.writeStalled`): its peer does not read. 0: never. Checked once a
    /// second, so it comes up to a second late.
    public var writeStallSeconds: Double = 0
    /// Value of the `Server` header.
    public var serverName: String = "steno"
    /// Where the transport, and libwebsockets at warning and error level, log.
    public var log = Log()

    /// The settings a service must choose; the rest have defaults.
    public init(host: String, port: Int, maxMessageSize: Int, outboundByteLimit: Int) {
        self.host = host
        self.port = port
        self.maxMessageSize = maxMessageSize
        self.outboundByteLimit = outboundByteLimit
    }

    public var usesTLS: Bool { tlsCertificatePath != nil && tlsKeyPath != nil }
}
