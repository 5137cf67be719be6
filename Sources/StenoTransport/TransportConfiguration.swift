import StenoSystem

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
    /// Seconds after a WebSocket was last heard from (a pong or any data) at which
    /// libwebsockets pings it; it hangs up on one silent for twice that plus 10 s. 0: never.
    public var keepAliveSeconds: Int = 0
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
