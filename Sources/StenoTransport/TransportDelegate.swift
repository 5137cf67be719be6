/// What the session layer implements to use the transport.
///
/// Every method is called on the lws service thread, one at a time, never
/// concurrently, so an implementation needs no locks for state it only touches
/// here. Methods must not block (no waiting on other threads, no disk or DNS work
/// that can stall): every connection of the server is served by this one thread.
/// To act on a connection, use the `TransportHandle` (it may be called from here or
/// from any other thread).
public protocol TransportDelegate: AnyObject {
    /// A WebSocket upgrade arrived. Decide before any session exists: route, auth,
    /// origin, capacity, draining.
    func decideUpgrade(_ request: UpgradeRequest) -> UpgradeDecision

    /// The transport refused an upgrade itself, before `decideUpgrade`: not a well-formed
    /// WebSocket handshake (`status` 400 or 426) or a request head over the limit (431).
    func refusedMalformedUpgrade(status: Int)

    /// The transport refused a new connection before reading from it (too many unfinished
    /// request heads from its address, or in all), with 429 or 503.
    func refusedConnection(_ refusal: ConnectionRefusal)

    /// `id` was closed with 1013: a piece of a message would have taken the memory of
    /// unfinished messages past its budget (`TransportConfiguration.unfinishedMessagesMemory`).
    func refusedMessage(_ id: ConnectionID)

    /// An accepted upgrade completed; `id` is now open.
    func opened(_ id: ConnectionID, request: UpgradeRequest)

    /// A complete message arrived. Not called once a close of `id` was requested.
    func received(_ id: ConnectionID, _ message: IncomingMessage)

    /// A message exceeded the frame-size limit. The transport stopped buffering it
    /// and drops the rest of it; the protocol answers `too_large` and closes 1009.
    func tooLarge(_ id: ConnectionID, limit: Int)

    /// `id` has had outbound data waiting for `TransportConfiguration.writeStallSeconds` with
    /// nothing written: its peer is not reading. Reported once; the delegate decides (the
    /// protocol closes it as a slow consumer).
    func writeStalled(_ id: ConnectionID)

    /// `id` is gone (closed by either side, or by the server stopping). Called exactly
    /// once for every `opened`, and never for anything else. `backlog` is what it left
    /// behind, if it kept its written messages (`TransportHandle.retainWritten`).
    func closed(_ id: ConnectionID, backlog: OutboundBacklog?)

    /// A plain HTTP request (GET or HEAD; the transport answers 405 to other methods
    /// itself). Return nil for 404.
    func http(_ request: HTTPRequest) -> HTTPResponse?

    /// A POST with its whole body (at most `TransportConfiguration.maxBodyBytes`). Return the
    /// answer, or nil to give it later with `TransportHandle.respond(exchange, …)`, from any
    /// thread (work that takes seconds must not hold the service thread). Delegates that take
    /// no POSTs leave the default, 405.
    func http(_ request: HTTPRequest, body: [UInt8], exchange: HTTPExchange) -> HTTPResponse?

    /// Periodic tick (`TransportConfiguration.tickInterval`), for idle timeouts,
    /// progress reports and session limits.
    func tick()
}

extension TransportDelegate {
    public func tooLarge(_ id: ConnectionID, limit: Int) {}
    public func writeStalled(_ id: ConnectionID) {}
    public func refusedMalformedUpgrade(status: Int) {}
    public func refusedConnection(_ refusal: ConnectionRefusal) {}
    public func refusedMessage(_ id: ConnectionID) {}
    public func http(_ request: HTTPRequest) -> HTTPResponse? { nil }
    public func http(_ request: HTTPRequest, body: [UInt8], exchange: HTTPExchange) -> HTTPResponse? {
        .plain(status: 405, headers: [("Allow", "GET, HEAD")])
    }
    public func tick() {}
}

/// What the session layer does to connections: everything it needs of the transport, and all
/// it may do from any thread. `TransportHandle` is the libwebsockets one; tests of the session
/// layer give it one in memory, with no sockets.
public protocol ConnectionSink: Sendable {
    /// Queues `message` for `id` (see `TransportHandle.send`).
    @discardableResult
    func send(_ id: ConnectionID, _ message: OutgoingMessage) -> SendResult
    /// Closes `id` once what is queued was written, or at once with `discardQueued`.
    func close(_ id: ConnectionID, code: UInt16, reason: String, discardQueued: Bool)
    /// Stops or resumes reading `id`'s socket (TCP backpressure on the client).
    func setReading(_ id: ConnectionID, _ reading: Bool)
    /// Answers a POST the delegate took to answer later (see `TransportHandle.respond`), whole
    /// or streamed (`respondStreaming`, then `write`s).
    func respond(_ exchange: HTTPExchange, _ response: HTTPResponse)
    func respondStreaming(_ exchange: HTTPExchange, head: HTTPResponse)
    func write(_ exchange: HTTPExchange, _ bytes: [UInt8], final: Bool)
    /// Unsent outbound bytes of `id`, or nil when it is not open.
    func queuedBytes(_ id: ConnectionID) -> Int?
    /// Keeps up to `bytes` of the numbered messages last written to `id`, for a resume.
    func retainWritten(_ id: ConnectionID, bytes: Int)
    /// Continues on `id` what another connection left behind (see `TransportHandle.adopt`).
    func adopt(_ id: ConnectionID, _ backlog: OutboundBacklog, after ordinal: UInt64, retaining bytes: Int) -> Bool
    /// Drops `id` at once and hands over what it kept (see `TransportHandle.detach`).
    func detach(_ id: ConnectionID) -> OutboundBacklog?
}

extension ConnectionSink {
    public func close(_ id: ConnectionID, code: UInt16, reason: String = "") {
        close(id, code: code, reason: reason, discardQueued: false)
    }
}

extension TransportHandle: ConnectionSink {}

extension ConnectionSink {
    /// A sink with no HTTP (the session layer's tests in memory) has nobody to answer.
    public func respond(_ exchange: HTTPExchange, _ response: HTTPResponse) {}
    public func respondStreaming(_ exchange: HTTPExchange, head: HTTPResponse) {}
    public func write(_ exchange: HTTPExchange, _ bytes: [UInt8], final: Bool) {}
}
