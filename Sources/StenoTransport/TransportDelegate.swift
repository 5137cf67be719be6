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

    /// An accepted upgrade completed; `id` is now open.
    func opened(_ id: ConnectionID, request: UpgradeRequest)

    /// A complete message arrived. Not called once a close of `id` was requested.
    func received(_ id: ConnectionID, _ message: IncomingMessage)

    /// A message exceeded the frame-size limit. The transport stopped buffering it
    /// and drops the rest of it; the protocol answers `too_large` and closes 1009.
    func tooLarge(_ id: ConnectionID, limit: Int)

    /// `id` is gone (closed by either side, or by the server stopping). Called exactly
    /// once for every `opened`, and never for anything else. `backlog` is what it left
    /// behind, if it kept its written messages (`TransportHandle.retainWritten`).
    func closed(_ id: ConnectionID, backlog: OutboundBacklog?)

    /// A plain HTTP request (GET or HEAD; the transport answers 405 to other methods
    /// itself). Return nil for 404.
    func http(_ request: HTTPRequest) -> HTTPResponse?

    /// Periodic tick (`TransportConfiguration.tickInterval`), for idle timeouts,
    /// progress reports and session limits.
    func tick()
}

extension TransportDelegate {
    public func tooLarge(_ id: ConnectionID, limit: Int) {}
    public func http(_ request: HTTPRequest) -> HTTPResponse? { nil }
    public func tick() {}
}
