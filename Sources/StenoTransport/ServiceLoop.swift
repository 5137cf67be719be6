import CLibWebSockets
import CLwsShims
import Foundation
import StenoCore
import Synchronization

/// A WebSocket connection as the service thread sees it.
final class LiveConnection {
    let id: ConnectionID
    let wsi: OpaquePointer
    /// Fragments of the message being received.
    var rx: [UInt8] = []
    var inMessage = false
    var rxIsBinary = false
    /// The current message went over the size limit: drop the rest of it.
    var rxDiscarding = false
    /// Set when a close was requested: sent once the queue is empty.
    var closeCode: UInt16?
    var closeReason = ""
    var closeDeadline: ContinuousClock.Instant?
    /// When data from the peer last counted as proof that it is there (keepalive).
    var lastConfirmed: ContinuousClock.Instant?

    init(id: ConnectionID, wsi: OpaquePointer) {
        self.id = id
        self.wsi = wsi
    }
}

/// An HTTP response being written in pieces, one `lws_write` per HTTP_WRITEABLE.
final class PendingHTTPResponse {
    let bytes: [UInt8]
    var offset = 0
    let closeAfter: Bool

    init(bytes: [UInt8], closeAfter: Bool) {
        self.bytes = bytes
        self.closeAfter = closeAfter
    }
}

/// Everything that runs on the lws service thread: the context, the callback
/// dispatch, connection bookkeeping and the delegate.
///
/// `@unchecked Sendable`: it is created on the caller's thread and handed once to
/// the service thread, which is from then on the only thread that touches its
/// mutable state (the `handle` and the atomics are the thread-safe parts). The
/// delegate is reached only from here.
final class ServiceLoop: @unchecked Sendable {
    let configuration: TransportConfiguration
    let handle: TransportHandle
    let delegate: any TransportDelegate
    let stopRequested = Atomic<Bool>(false)

    private var context: OpaquePointer?
    private var connections: [ConnectionID: LiveConnection] = [:]
    private var closing: Set<ConnectionID> = []
    /// Accepted upgrades between HTTP_CONFIRM_UPGRADE and ESTABLISHED, by wsi.
    private var pendingUpgrades: [OpaquePointer: UpgradeRequest] = [:]
    private var httpResponses: [OpaquePointer: PendingHTTPResponse] = [:]
    private var nextID: UInt64 = 1
    private var drainingCommands = false

    // C memory that must outlive the context.
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private var cStrings: [UnsafeMutablePointer<CChar>] = []
    /// The idle policy handed to the context: lws keeps the pointer for the context's life.
    private let idlePolicy: UnsafeMutablePointer<lws_retry_bo_t>
    /// An `lws_sorted_usec_list_t` followed by a pointer back to this object.
    private let tickTimer: UnsafeMutableRawPointer
    /// Scratch for HTTP writes: `LWS_PRE` headroom plus one chunk.
    private let httpScratch: UnsafeMutableRawPointer
    private static let httpChunk = 32 * 1024

    init(configuration: TransportConfiguration, handle: TransportHandle, delegate: any TransportDelegate) {
        self.configuration = configuration
        self.handle = handle
        self.delegate = delegate
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        idlePolicy = .allocate(capacity: 1)
        idlePolicy.initialize(to: lws_retry_bo_t())
        tickTimer = .allocate(byteCount: ServiceLoop.tickTimerSize, alignment: 16)
        tickTimer.initializeMemory(as: UInt8.self, repeating: 0, count: ServiceLoop.tickTimerSize)
        httpScratch = .allocate(byteCount: steno_lws_pre + ServiceLoop.httpChunk, alignment: 16)
    }

    deinit {
        protocols.deinitialize(count: 2)
        idlePolicy.deinitialize(count: 1)
        idlePolicy.deallocate()
        protocols.deallocate()
        for s in cStrings { free(s) }
        tickTimer.deallocate()
        httpScratch.deallocate()
    }

    private static var tickTimerSize: Int {
        MemoryLayout<lws_sorted_usec_list_t>.stride + MemoryLayout<UnsafeMutableRawPointer>.stride
    }

    private func cString(_ s: String) -> UnsafeMutablePointer<CChar> {
        let p = strdup(s)!
        cStrings.append(p)
        return p
    }

    // MARK: - Life cycle (on the service thread)

    enum StartError: Error, CustomStringConvertible {
        case contextCreationFailed(String)
        var description: String {
            switch self {
            case .contextCreationFailed(let why): "could not start the server: \(why)"
            }
        }
    }

    /// Creates the context; returns the bound port.
    func createContext() throws -> Int {
        let cfg = configuration
        protocols[0].name = UnsafePointer(cString("steno"))
        protocols[0].callback = stenoLwsCallback
        protocols[0].per_session_data_size = 0
        // Largest piece of a message handed to one RECEIVE callback.
        protocols[0].rx_buffer_size = 16 * 1024
        // Largest single send() lws tries; 0 would mean rx_buffer_size, which would
        // push every bigger message through lws's own partial-write buffer (a copy).
        protocols[0].tx_packet_size = 256 * 1024

        var info = lws_context_creation_info()
        info.protocols = UnsafePointer(protocols)
        info.port = Int32(cfg.port)
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.vhost_name = UnsafePointer(cString("steno"))
        info.server_string = UnsafePointer(cString(cfg.serverName))
        info.gid = -1
        info.uid = -1
        // Only HTTP/1.1 (with WebSocket upgrade) is offered over TLS: h2 would bring
        // a second framing (and WebSocket-over-h2) the transport does not handle.
        info.alpn = UnsafePointer(cString("http/1.1"))
        var options = UInt64(LWS_SERVER_OPTION_VALIDATE_UTF8) | UInt64(LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND)

        let host = cfg.host
        switch host {
        case "", "::":
            info.iface = nil
        case "0.0.0.0":
            info.iface = nil
            options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6)
        default:
            info.iface = UnsafePointer(cString(host))
            if !host.contains(":") { options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6) }
        }
        if let cert = cfg.tlsCertificatePath, let key = cfg.tlsKeyPath {
            options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
            info.ssl_cert_filepath = UnsafePointer(cString(cert))
            info.ssl_private_key_filepath = UnsafePointer(cString(key))
        }
        info.options = options
        if cfg.keepAliveSeconds > 0 {
            // lws pings a connection this long after it was last heard from (a pong, or data:
            // see confirmAlive) and hangs up on one that stays silent: how peers that vanished
            // without a FIN (a phone off the network) are noticed.
            let ping = min(cfg.keepAliveSeconds, 20_000)
            idlePolicy.pointee.secs_since_valid_ping = UInt16(ping)
            idlePolicy.pointee.secs_since_valid_hangup = UInt16(min(2 * ping + 10, Int(UInt16.max)))
            info.retry_and_idle_policy = UnsafePointer(idlePolicy)
        }

        guard let ctx = lws_create_context(&info) else {
            throw StartError.contextCreationFailed("lws_create_context failed for \(host):\(cfg.port) (address in use, bad interface, or bad TLS files?)")
        }
        context = ctx
        var port = cfg.port
        if let vh = lws_get_vhost_by_name(ctx, "steno") {
            port = Int(lws_get_vhost_listen_port(vh))
        }
        handle.serviceStarted(context: ctx, port: port)
        return port
    }

    /// Serves until `stop` is requested, then destroys the context.
    func serve() {
        guard let ctx = context else { return }
        scheduleTick()
        drainCommands()  // anything posted before the thread started
        while !stopRequested.load(ordering: .acquiring) {
            if lws_service(ctx, 0) < 0 {
                configuration.log(.error, "lws_service failed; the server stops serving")
                break
            }
        }
        lws_sul_cancel(tickTimer.assumingMemoryBound(to: lws_sorted_usec_list_t.self))
        handle.serviceStopping()
        // Destroying the context closes every connection; their CLOSED callbacks
        // (and the delegate's `closed`) run here, on this thread.
        lws_context_destroy(ctx)
        context = nil
        connections.removeAll()
        pendingUpgrades.removeAll()
        httpResponses.removeAll()
    }

    // MARK: - Ticks (lws sul timer on this thread)

    private func scheduleTick() {
        guard let ctx = context else { return }
        let sul = tickTimer.assumingMemoryBound(to: lws_sorted_usec_list_t.self)
        tickTimer.storeBytes(of: Unmanaged.passUnretained(self).toOpaque(),
                             toByteOffset: MemoryLayout<lws_sorted_usec_list_t>.stride,
                             as: UnsafeMutableRawPointer.self)
        let us = lws_usec_t(max(0.001, configuration.tickInterval) * 1_000_000)
        lws_sul_schedule(ctx, 0, sul, stenoTickCallback, us)
    }

    static func fromTickTimer(_ sul: UnsafeMutableRawPointer) -> ServiceLoop {
        let owner = sul.load(fromByteOffset: MemoryLayout<lws_sorted_usec_list_t>.stride, as: UnsafeMutableRawPointer.self)
        return Unmanaged<ServiceLoop>.fromOpaque(owner).takeUnretainedValue()
    }

    func tick() {
        if stopRequested.load(ordering: .acquiring) { return }
        if !closing.isEmpty {
            let now = ContinuousClock.now
            for id in closing {
                guard let c = connections[id], let deadline = c.closeDeadline, now >= deadline else { continue }
                // The queue did not flush in time (a client that does not read):
                // cut the connection without waiting for a close frame to get out.
                c.closeDeadline = nil
                configuration.log(.info, "connection \(id) did not flush before closing; cut")
                lws_set_timeout(c.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            }
        }
        delegate.tick()
        drainCommands()
        scheduleTick()
    }

    // MARK: - Commands from other threads

    func drainCommands() {
        if drainingCommands { return }
        drainingCommands = true
        defer { drainingCommands = false }
        while true {
            let commands = handle.takeCommands()
            if commands.isEmpty { return }
            for command in commands {
                switch command {
                case .writable(let id):
                    if let c = connections[id] { lws_callback_on_writable(c.wsi) }
                case .close(let id, let code, let reason):
                    guard let c = connections[id], c.closeCode == nil else { continue }
                    c.closeCode = code
                    c.closeReason = reason
                    c.closeDeadline = ContinuousClock.now + .milliseconds(Int(configuration.closeFlushTimeout * 1000))
                    closing.insert(id)
                    c.rx = []
                    // Read again (and discard) so the client's close frame is seen and
                    // the closing handshake can finish.
                    setReading(c.wsi, true)
                    lws_callback_on_writable(c.wsi)
                case .setReading(let id, let reading):
                    if let c = connections[id] { setReading(c.wsi, reading) }
                case .perform(let body):
                    body(delegate)
                }
            }
        }
    }

    /// lws applies a flow-control change for the wsi whose callback is running when
    /// that callback returns; for any other wsi the change must be forced now
    /// (LWS_RXFLOW_REASON_FLAG_PROCESS_NOW), as lws-misc.h says.
    private func setReading(_ wsi: OpaquePointer, _ reading: Bool) {
        var flags = Int32(LWS_RXFLOW_REASON_APPLIES | LWS_RXFLOW_REASON_USER_BOOL)
        if reading { flags |= Int32(LWS_RXFLOW_REASON_APPLIES_ENABLE_BIT) }
        if wsi != currentWSI { flags |= Int32(LWS_RXFLOW_REASON_FLAG_PROCESS_NOW) }
        lws_rx_flow_control(wsi, flags)
    }

    // MARK: - Callback dispatch

    /// The wsi whose callback is running (callbacks can nest).
    private var currentWSI: OpaquePointer?

    func callback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        let outer = currentWSI
        currentWSI = wsi
        defer { currentWSI = outer }
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            drainCommands()
            return 0

        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
            guard let wsi else { return -1 }
            return confirmUpgrade(wsi, upgrade: input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "")

        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
            // Only upgrades this transport accepted in HTTP_CONFIRM_UPGRADE go on.
            guard let wsi, pendingUpgrades[wsi] != nil else { return 1 }
            return 0

        case LWS_CALLBACK_ESTABLISHED:
            guard let wsi else { return -1 }
            return established(wsi)

        case LWS_CALLBACK_RECEIVE:
            guard let wsi else { return -1 }
            return receive(wsi, input, length)

        case LWS_CALLBACK_SERVER_WRITEABLE:
            guard let wsi else { return -1 }
            return writeable(wsi)

        case LWS_CALLBACK_CLOSED:
            if let wsi { finish(wsi) }
            return 0

        case LWS_CALLBACK_HTTP:
            guard let wsi else { return -1 }
            return http(wsi)

        case LWS_CALLBACK_HTTP_WRITEABLE:
            guard let wsi else { return -1 }
            return httpWriteable(wsi)

        case LWS_CALLBACK_CLOSED_HTTP:
            if let wsi {
                httpResponses[wsi] = nil
                pendingUpgrades[wsi] = nil
            }
            return 0

        case LWS_CALLBACK_WSI_DESTROY:
            // Sent for every wsi, however far it got: the last word on it.
            if let wsi {
                httpResponses[wsi] = nil
                pendingUpgrades[wsi] = nil
                finish(wsi)
            }
            return 0

        default:
            // Everything else (protocol init/destroy, bind/drop, network filters,
            // HTTP bodies we do not read, peer-initiated close, …) needs no action.
            return 0
        }
    }

    // MARK: - WebSocket connections

    private func connectionID(of wsi: OpaquePointer) -> ConnectionID? {
        guard let raw = lws_get_opaque_user_data(wsi) else { return nil }
        return ConnectionID(rawValue: UInt64(UInt(bitPattern: raw)))
    }

    private func confirmUpgrade(_ wsi: OpaquePointer, upgrade: String) -> Int32 {
        switch upgrade.lowercased() {
        case "websocket":
            break
        case "h2c":
            // Not offered (HTTP/1.1 only).
            return refuse(wsi, .plain(status: 400))
        default:
            // lws has already answered an unknown upgrade with 403 itself and still
            // asks: just hang up.
            return -1
        }
        let request = UpgradeRequest(path: uriPath(wsi) ?? "", query: queryItems(wsi), headers: requestHeaders(wsi), remoteAddress: peerAddress(wsi))
        let decision = delegate.decideUpgrade(request)
        defer { drainCommands() }
        switch decision {
        case .accept:
            pendingUpgrades[wsi] = request
            return 0
        case .reject(let response):
            return refuse(wsi, response)
        }
    }

    /// Answers an upgrade request with an HTTP response and hangs up. lws 4.1 lets
    /// HTTP_CONFIRM_UPGRADE write the answer itself (as `lws_return_http_status`
    /// does) and return -1: the connection is then closed after lws flushed what it
    /// could not send at once.
    private func refuse(_ wsi: OpaquePointer, _ response: HTTPResponse) -> Int32 {
        guard let bytes = encodeResponse(wsi, response, includeBody: true, close: true) else { return -1 }
        let pre = steno_lws_pre
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: pre + bytes.count, alignment: 16)
        defer { buffer.deallocate() }
        bytes.withUnsafeBytes { (buffer + pre).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        _ = lws_write(wsi, (buffer + pre).assumingMemoryBound(to: UInt8.self), bytes.count, LWS_WRITE_HTTP_FINAL)
        return -1
    }

    private func established(_ wsi: OpaquePointer) -> Int32 {
        guard let request = pendingUpgrades.removeValue(forKey: wsi) else { return -1 }
        let id = ConnectionID(rawValue: nextID)
        nextID += 1
        lws_set_opaque_user_data(wsi, UnsafeMutableRawPointer(bitPattern: UInt(id.rawValue)))
        let c = LiveConnection(id: id, wsi: wsi)
        connections[id] = c
        handle.register(id)
        delegate.opened(id, request: request)
        drainCommands()
        return 0
    }

    /// Data from the peer proves it is there as well as a pong does: without this, a client
    /// sending audio faster than it is analyzed, whose pong waits in the socket behind audio
    /// the server is not reading yet (flow control), would be hung up on by the keepalive.
    /// At most once a second per connection (it moves an lws timer).
    private func confirmAlive(_ c: LiveConnection) {
        guard configuration.keepAliveSeconds > 0 else { return }
        let now = ContinuousClock.now
        if let last = c.lastConfirmed, now - last < .seconds(1) { return }
        c.lastConfirmed = now
        lws_validity_confirmed(c.wsi)
    }

    private func receive(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let id = connectionID(of: wsi), let c = connections[id] else { return -1 }
        if c.closeCode != nil { return 0 }  // closing: the session is over
        confirmAlive(c)
        let final = lws_is_final_fragment(wsi) != 0
        let piece = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
        let limit = configuration.maxMessageSize

        if !c.inMessage {
            c.inMessage = true
            c.rxIsBinary = lws_frame_is_binary(wsi) != 0
            c.rxDiscarding = false
            // The common case: a whole message in one piece, handed over with a
            // single copy out of lws's buffer.
            if final && piece.count <= limit {
                c.inMessage = false
                deliver(id, binary: c.rxIsBinary, piece)
                return 0
            }
        }
        if !c.rxDiscarding {
            if c.rx.count + piece.count > limit {
                c.rxDiscarding = true
                c.rx = []
                delegate.tooLarge(id, limit: limit)
                drainCommands()
            } else {
                c.rx.append(contentsOf: piece)
            }
        }
        if final {
            c.inMessage = false
            let bytes = c.rx
            let complete = !c.rxDiscarding && c.closeCode == nil
            c.rx = []
            c.rxDiscarding = false
            // The joined fragments are handed over as they are (no copy).
            if complete { deliver(id, binary: c.rxIsBinary, bytes) }
        }
        return 0
    }

    private func deliver(_ id: ConnectionID, binary: Bool, _ bytes: UnsafeRawBufferPointer) {
        deliver(id, binary ? .binary([UInt8](bytes)) : .text(String(decoding: bytes, as: UTF8.self)))
    }

    private func deliver(_ id: ConnectionID, binary: Bool, _ bytes: [UInt8]) {
        deliver(id, binary ? .binary(bytes) : .text(String(decoding: bytes, as: UTF8.self)))
    }

    private func deliver(_ id: ConnectionID, _ message: IncomingMessage) {
        delegate.received(id, message)
        drainCommands()
    }

    private func writeable(_ wsi: OpaquePointer) -> Int32 {
        guard let id = connectionID(of: wsi), let c = connections[id] else { return 0 }
        let (taken, messageKind, more) = handle.takeNext(id)
        if let frame = taken {
            let kind = messageKind == .text ? LWS_WRITE_TEXT : LWS_WRITE_BINARY
            // One lws_write per WRITEABLE. If the socket takes only part of it, lws
            // keeps the rest and sends it before calling WRITEABLE again.
            let n = lws_write(wsi, frame.payload, frame.payloadCount, kind)
            if n < frame.payloadCount { return -1 }
            if more || c.closeCode != nil { lws_callback_on_writable(wsi) }
            return 0
        }
        if let code = c.closeCode {
            var reason = Array(c.closeReason.utf8.prefix(123))
            while !reason.isEmpty, String(validatingUTF8Bytes: reason) == nil { reason.removeLast() }
            reason.withUnsafeMutableBufferPointer { r in
                lws_close_reason(wsi, lws_close_status(UInt32(code)), r.baseAddress, r.count)
            }
            return -1
        }
        return 0
    }

    /// The connection on `wsi` is gone: tell the delegate, once.
    private func finish(_ wsi: OpaquePointer) {
        guard let id = connectionID(of: wsi) else { return }
        lws_set_opaque_user_data(wsi, nil)
        guard connections.removeValue(forKey: id) != nil else { return }
        closing.remove(id)
        handle.unregister(id)
        delegate.closed(id)
        drainCommands()
    }

    // MARK: - HTTP

    private func http(_ wsi: OpaquePointer) -> Int32 {
        var uriPointer: UnsafeMutablePointer<CChar>?
        var uriLength: Int32 = 0
        let m = lws_http_get_uri_and_method(wsi, &uriPointer, &uriLength)
        let path: String
        if let uriPointer, uriLength >= 0 {
            path = String(decoding: UnsafeRawBufferPointer(start: uriPointer, count: Int(uriLength)), as: UTF8.self)
        } else {
            path = "/"
        }
        let method: HTTPMethod
        switch m {
        case Int32(LWSHUMETH_GET): method = .get
        case Int32(LWSHUMETH_HEAD): method = .head
        default: method = .other(Self.methodName(m))
        }
        let isHead = method == .head
        guard method == .get || isHead else {
            let response = HTTPResponse.plain(status: 405, headers: [("Allow", "GET, HEAD")])
            return startHTTPResponse(wsi, response, includeBody: true, close: true)
        }
        let request = HTTPRequest(method: method, path: path, query: queryItems(wsi), headers: requestHeaders(wsi), remoteAddress: peerAddress(wsi))
        let response = delegate.http(request) ?? .plain(status: 404)
        drainCommands()
        return startHTTPResponse(wsi, response, includeBody: !isHead, close: false)
    }

    private static func methodName(_ m: Int32) -> String {
        switch m {
        case Int32(LWSHUMETH_POST): "POST"
        case Int32(LWSHUMETH_OPTIONS): "OPTIONS"
        case Int32(LWSHUMETH_PUT): "PUT"
        case Int32(LWSHUMETH_PATCH): "PATCH"
        case Int32(LWSHUMETH_DELETE): "DELETE"
        case Int32(LWSHUMETH_CONNECT): "CONNECT"
        default: "UNKNOWN"
        }
    }

    private func startHTTPResponse(_ wsi: OpaquePointer, _ response: HTTPResponse, includeBody: Bool, close: Bool) -> Int32 {
        guard let bytes = encodeResponse(wsi, response, includeBody: includeBody, close: close) else { return -1 }
        httpResponses[wsi] = PendingHTTPResponse(bytes: bytes, closeAfter: close)
        lws_callback_on_writable(wsi)
        return 0
    }

    private func httpWriteable(_ wsi: OpaquePointer) -> Int32 {
        guard let pending = httpResponses[wsi] else { return 0 }
        let remaining = pending.bytes.count - pending.offset
        let n = min(remaining, ServiceLoop.httpChunk)
        let last = n == remaining
        let pre = steno_lws_pre
        pending.bytes.withUnsafeBytes { src in
            (httpScratch + pre).copyMemory(from: src.baseAddress! + pending.offset, byteCount: n)
        }
        let written = lws_write(wsi, (httpScratch + pre).assumingMemoryBound(to: UInt8.self), n,
                                last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP)
        if written < n { return -1 }
        pending.offset += n
        if !last {
            lws_callback_on_writable(wsi)
            return 0
        }
        httpResponses[wsi] = nil
        if pending.closeAfter { return -1 }
        // Ready for the next request on a keep-alive connection, or close.
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }

    /// Status line and headers (made by lws, which knows the request's HTTP
    /// version and adds the `Server` header), then the body.
    private func encodeResponse(_ wsi: OpaquePointer, _ response: HTTPResponse, includeBody: Bool, close: Bool) -> [UInt8]? {
        var fields: [(String, String)] = [("content-type:", response.contentType),
                                          ("content-length:", String(response.body.count))]
        for h in response.headers {
            fields.append((Self.headerToken(h.name) + ":", Self.headerValue(h.value)))
        }
        if close { fields.append(("connection:", "close")) }
        let capacity = 512 + fields.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 }
        var header = [UInt8](repeating: 0, count: capacity)
        let length: Int? = header.withUnsafeMutableBufferPointer { buf -> Int? in
            let start = buf.baseAddress!
            let end = start + buf.count
            var p: UnsafeMutablePointer<UInt8>? = start
            let status = UInt32(clamping: max(100, min(999, response.status)))
            if lws_add_http_header_status(wsi, status, &p, end) != 0 { return nil }
            for (name, value) in fields {
                let failed = name.withCString { n in
                    value.withCString { v in
                        lws_add_http_header_by_name(wsi, UnsafeRawPointer(n).assumingMemoryBound(to: UInt8.self),
                                                    UnsafeRawPointer(v).assumingMemoryBound(to: UInt8.self),
                                                    Int32(value.utf8.count), &p, end) != 0
                    }
                }
                if failed { return nil }
            }
            if lws_finalize_http_header(wsi, &p, end) != 0 { return nil }
            guard let p else { return nil }
            return p - start
        }
        guard let length else { return nil }
        header.removeSubrange(length...)
        if includeBody { header.append(contentsOf: response.body) }
        return header
    }

    /// A header name reduced to token characters (no injection of other fields).
    private static func headerToken(_ name: String) -> String {
        String(name.lowercased().unicodeScalars.filter { c in
            c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || "-_.!#$%&'*+^`|~".unicodeScalars.contains(c))
        }.map(Character.init))
    }

    /// A header value without control characters (no CR/LF injection).
    private static func headerValue(_ value: String) -> String {
        String(value.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }.map(Character.init))
    }

    // MARK: - Request details

    private func headerValue(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let total = Int(lws_hdr_total_length(wsi, token))
        guard total > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: total + 1)
        let n = lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token)
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func uriPath(_ wsi: OpaquePointer) -> String? {
        headerValue(wsi, WSI_TOKEN_GET_URI)
    }

    private func requestHeaders(_ wsi: OpaquePointer) -> HTTPHeaders {
        var headers = HTTPHeaders()
        let wanted: [(String, lws_token_indexes)] = [
            ("authorization", WSI_TOKEN_HTTP_AUTHORIZATION),
            ("origin", WSI_TOKEN_ORIGIN),
            ("host", WSI_TOKEN_HOST),
            ("user-agent", WSI_TOKEN_HTTP_USER_AGENT),
            ("sec-websocket-protocol", WSI_TOKEN_PROTOCOL),
            ("x-forwarded-for", WSI_TOKEN_X_FORWARDED_FOR),
        ]
        for (name, token) in wanted {
            if let v = headerValue(wsi, token) { headers.add(name, v) }
        }
        return headers
    }

    /// Query parameters: lws splits them at `&` and percent-decodes each.
    private func queryItems(_ wsi: OpaquePointer) -> [QueryItem] {
        let total = Int(lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS))
        guard total > 0 else { return [] }
        var buffer = [CChar](repeating: 0, count: total + 1)
        var items: [QueryItem] = []
        var index: Int32 = 0
        while index < 256 {
            let n = lws_hdr_copy_fragment(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_URI_ARGS, index)
            if n < 0 { break }
            index += 1
            let text = String(decoding: buffer[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.isEmpty { continue }
            if let eq = text.firstIndex(of: "=") {
                items.append(QueryItem(name: String(text[..<eq]), value: String(text[text.index(after: eq)...])))
            } else {
                items.append(QueryItem(name: text, value: ""))
            }
        }
        return items
    }

    private func peerAddress(_ wsi: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        guard lws_get_peer_simple(wsi, &buffer, buffer.count) != nil else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

private extension String {
    init?(validatingUTF8Bytes bytes: [UInt8]) {
        var it = bytes.makeIterator()
        var decoder = UTF8()
        loop: while true {
            switch decoder.decode(&it) {
            case .scalarValue: continue
            case .emptyInput: break loop
            case .error: return nil
            }
        }
        self = String(decoding: bytes, as: UTF8.self)
    }
}
