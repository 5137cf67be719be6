import CLibWebSockets
import CLwsShims
import Foundation
import StenoCore
import Synchronization

/// The C memory a client context keeps pointers to for its life (the protocols array, C
/// strings of the creation and connect infos, the idle policy). Freed after the context.
final class LwsClientStorage {
    let protocols: UnsafeMutablePointer<lws_protocols>
    let idlePolicy: UnsafeMutablePointer<lws_retry_bo_t>
    /// Where lws writes the connection's wsi as soon as it exists (before the handshake).
    let wsiSlot: UnsafeMutablePointer<OpaquePointer?>
    /// The keepalive's once-a-second timer (`WebSocketClient.keepAliveTick`): an
    /// `lws_sorted_usec_list_t` followed by a pointer to its client.
    let keepAliveTimer: UnsafeMutableRawPointer
    static let timerSize = MemoryLayout<lws_sorted_usec_list_t>.stride + MemoryLayout<UnsafeMutableRawPointer>.stride
    private var cStrings: [UnsafeMutablePointer<CChar>] = []

    init() {
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        idlePolicy = .allocate(capacity: 1)
        idlePolicy.initialize(to: lws_retry_bo_t())
        wsiSlot = .allocate(capacity: 1)
        wsiSlot.initialize(to: nil)
        keepAliveTimer = .allocate(byteCount: Self.timerSize, alignment: 16)
        keepAliveTimer.initializeMemory(as: UInt8.self, repeating: 0, count: Self.timerSize)
    }

    deinit {
        protocols.deinitialize(count: 2)
        protocols.deallocate()
        idlePolicy.deinitialize(count: 1)
        idlePolicy.deallocate()
        wsiSlot.deallocate()
        keepAliveTimer.deallocate()
        for s in cStrings { free(s) }
    }

    func cString(_ s: String) -> UnsafePointer<CChar> {
        let p = strdup(s)!
        cStrings.append(p)
        return UnsafePointer(p)
    }
}

extension WebSocketClient {
    // MARK: - Life (on the service thread)

    func serve() {
        guard let ctx = makeContext() else {
            deliver(.failed("could not set up the connection (libwebsockets context; is the CA file readable?)"))
            return
        }
        shared.withLock { s in
            s.context = LwsContextRef(pointer: ctx)
            s.wakePending = false
        }
        if !terminalDelivered && !shared.withLock({ $0.dropRequested }) {
            startConnecting(ctx)
        }
        while !terminalDelivered {
            if shared.withLock({ $0.dropRequested }) { break }
            if lws_service(ctx, 0) < 0 { break }
        }
        shared.withLock { s in s.context = nil }
        // Destroying the context closes a connection still open; its callbacks run here.
        lws_context_destroy(ctx)
        wsi = nil
        deliver(.closed(code: nil, reason: "", byPeer: false))
    }

    private func makeContext() -> OpaquePointer? {
        storage.protocols[0].name = storage.cString("steno-client")
        storage.protocols[0].callback = stenoLwsClientCallback
        storage.protocols[0].rx_buffer_size = 16 * 1024
        storage.protocols[0].tx_packet_size = 64 * 1024

        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = UnsafePointer(storage.protocols)
        info.gid = -1
        info.uid = -1
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.fd_limit_per_thread = 8
        let timeout = UInt32(max(1, configuration.connectTimeoutSeconds))
        info.timeout_secs = timeout
        info.connect_timeout_secs = timeout
        var options: UInt64 = 0
        if configuration.url.secure {
            options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
            if let ca = configuration.caFile {
                // lws only logs a CA file it cannot load; refuse it here instead, so that a
                // typo is an error and not a failed verification later.
                guard access(ca, R_OK) == 0 else { return nil }
                info.client_ssl_ca_filepath = storage.cString(ca)
            }
        }
        info.options = options
        return lws_create_context(&info)
    }

    private func startConnecting(_ ctx: OpaquePointer) {
        let url = configuration.url
        var cc = lws_client_connect_info()
        cc.context = ctx
        cc.address = storage.cString(url.host)
        cc.port = Int32(url.port)
        cc.path = storage.cString(url.path)
        cc.host = storage.cString(url.hostHeader)
        cc.ssl_connection = url.secure ? Int32(LCCSCF_USE_SSL.rawValue) : 0
        // HTTP/1.1 only: lws 4.1 cannot upgrade to a WebSocket over h2.
        cc.alpn = storage.cString("http/1.1")
        if configuration.keepAliveSeconds > 0 {
            let ping = min(configuration.keepAliveSeconds, 20_000)
            storage.idlePolicy.pointee.secs_since_valid_ping = UInt16(ping)
            storage.idlePolicy.pointee.secs_since_valid_hangup = UInt16(min(2 * ping + 10, Int(UInt16.max)))
            cc.retry_and_idle_policy = UnsafePointer(storage.idlePolicy)
        }
        cc.pwsi = storage.wsiSlot
        // Failures inside the call are reported by its nil result, not by a callback.
        if lws_client_connect_via_info(&cc) == nil {
            deliver(.failed("cannot connect to \(url.hostHeader)"))
        }
    }

    // MARK: - Events

    func deliver(_ event: WebSocketClientEvent) {
        if terminalDelivered { return }
        if event.isFinal {
            terminalDelivered = true
            isOpen = false
            shared.withLock { s in s.finished = true }
        }
        handler?(event)
    }

    /// Acts on what other threads asked for (and what a handler asked for from here).
    func applyShared() {
        let (drop, hasWork) = shared.withLock { s -> (Bool, Bool) in
            s.wakePending = false
            return (s.dropRequested, !s.outbound.isEmpty || s.closeRequest != nil)
        }
        guard let wsi, isOpen else { return }
        if drop {
            // Cut without a close frame.
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            return
        }
        if hasWork { lws_callback_on_writable(wsi) }
    }

    // MARK: - Callbacks

    func callback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons,
                  _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        defer { if !terminalDelivered { applyShared() } }
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            return 0

        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            guard let wsi, let input else { return -1 }
            return appendHeaders(wsi, input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self), length)

        case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
            // The answer's headers are still there (lws frees them before ESTABLISHED).
            guard let wsi else { return 0 }
            let cookies = Self.setCookies(wsi)
            shared.withLock { $0.cookies = cookies }
            return 0

        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            guard let wsi else { return -1 }
            self.wsi = wsi
            isOpen = true
            if configuration.keepAliveSeconds > 0 { scheduleKeepAliveTick() }
            deliver(.opened)
            return 0

        case LWS_CALLBACK_CLIENT_RECEIVE:
            guard let wsi, isOpen else { return 0 }
            return receive(wsi, input, length)

        case LWS_CALLBACK_CLIENT_WRITEABLE:
            guard let wsi, isOpen else { return 0 }
            return writeable(wsi)

        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            peerClose = Self.closePayload(input, length)
            return 0

        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            var message = "connection failed"
            if let input, length > 0 {
                message = String(decoding: UnsafeRawBufferPointer(start: input, count: length), as: UTF8.self)
            }
            let status = wsi.map { Int(lws_http_client_http_response($0)) } ?? 0
            if status > 0 && status != 101 {
                deliver(.refused(status: status, retryAfter: wsi.flatMap(Self.retryAfter)))
            } else {
                deliver(.failed(message))
            }
            return 0

        case LWS_CALLBACK_CLIENT_CLOSED:
            closed()
            return 0

        case LWS_CALLBACK_WSI_DESTROY:
            // The last word on any wsi, however far it got (other wsis of the context, such
            // as its wake-up pipe, are not the connection).
            if let wsi, wsi == self.wsi || wsi == storage.wsiSlot.pointee {
                if isOpen { closed() } else { deliver(.failed("the connection closed during the handshake")) }
                self.wsi = nil
                storage.wsiSlot.pointee = nil
            }
            return 0

        default:
            return 0
        }
    }

    // MARK: - Keepalive under flow control

    /// Once a second while open (with a keepalive): a server that holds this client's writes
    /// back is not taken for gone.
    ///
    /// lws pings `keepAliveSeconds` after the server was last heard from (a pong, or any
    /// data: `receive`) and hangs up 10 s after twice that. But a server applying flow
    /// control (Steno's stops reading a session whose audio it is behind with) has closed its
    /// TCP window: the ping waits behind what it has not read yet, so no pong can come, and a
    /// server that is behind may have nothing to send for a minute (its session waiting for a
    /// decoder, a loaded machine): `steno send --fast` was hung up on after the 50 s and lost
    /// the audio it had handed to its socket. While the window is closed, the server's TCP
    /// answers the window probes (so it is there, telling this side to wait) and the server
    /// itself has sent something within the hang-up time (it pings a client it holds back
    /// every 5 s), the keepalive's clock is held, and runs again from when the window opens
    /// or the server falls silent. A server that vanished stops answering the probes, and a
    /// hung server process (its kernel answers them) stops sending: either is hung up on, the
    /// second a hang-up time later than a silent server with an open window.
    func keepAliveTick() {
        guard let wsi, isOpen, !terminalDelivered else { return }
        let hangUp = 2 * min(configuration.keepAliveSeconds, 20_000) + 10
        if Self.isHeldBack(wsi, heardWithin: hangUp) { lws_validity_confirmed(wsi) }
        scheduleKeepAliveTick()
    }

    private func scheduleKeepAliveTick() {
        guard let ctx = shared.withLock({ $0.context?.pointer }) else { return }
        let timer = storage.keepAliveTimer
        timer.storeBytes(of: Unmanaged.passUnretained(self).toOpaque(),
                         toByteOffset: MemoryLayout<lws_sorted_usec_list_t>.stride, as: UnsafeMutableRawPointer.self)
        lws_sul_schedule(ctx, 0, timer.assumingMemoryBound(to: lws_sorted_usec_list_t.self),
                         stenoLwsClientKeepAliveCallback, 1_000_000)
    }

    /// The server's TCP window is closed (it takes nothing more for now), it answers the
    /// probes of it (at most the latest one is outstanding), and data came from it within
    /// `heardWithin` seconds (a Steno server pings a client it holds back every few seconds,
    /// `ServiceLoop.pausedHeartbeat`: a hung server process, whose kernel still answers the
    /// probes, sends none).
    static func isHeldBack(_ wsi: OpaquePointer, heardWithin: Int) -> Bool {
        let fd = lws_get_socket_fd(wsi)
        guard fd >= 0 else { return false }
        var window: UInt32 = 0
        var unanswered: UInt32 = 0
        var sinceData: UInt32 = 0
        guard steno_socket_peer_window(fd, &window, &unanswered, &sinceData) == 0 else { return false }
        return window == 0 && unanswered <= 1 && Int(sinceData) < heardWithin * 1000
    }

    static func client(ofKeepAliveTimer sul: UnsafeMutableRawPointer) -> WebSocketClient {
        let owner = sul.load(fromByteOffset: MemoryLayout<lws_sorted_usec_list_t>.stride, as: UnsafeMutableRawPointer.self)
        return Unmanaged<WebSocketClient>.fromOpaque(owner).takeUnretainedValue()
    }

    private func closed() {
        if let peerClose {
            deliver(.closed(code: peerClose.code, reason: peerClose.reason, byPeer: true))
        } else if let sentClose {
            deliver(.closed(code: sentClose.code, reason: sentClose.reason, byPeer: false))
        } else {
            deliver(.closed(code: nil, reason: "", byPeer: false))
        }
        wsi = nil
    }

    private func appendHeaders(_ wsi: OpaquePointer, _ p: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, _ length: Int) -> Int32 {
        guard let start = p.pointee else { return -1 }
        let end = start + length
        for header in configuration.headers {
            let name = header.name.lowercased().hasSuffix(":") ? header.name.lowercased() : header.name.lowercased() + ":"
            let value = Array(header.value.utf8)
            let failed = name.withCString { n in
                value.withUnsafeBufferPointer { v in
                    lws_add_http_header_by_name(wsi, UnsafeRawPointer(n).assumingMemoryBound(to: UInt8.self),
                                                v.baseAddress, Int32(v.count), p, end)
                }
            }
            if failed != 0 { return -1 }
        }
        return 0
    }

    private func receive(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        if configuration.keepAliveSeconds > 0 {
            // Data proves the server is there as well as a pong does (at most once a second).
            let now = ContinuousClock.now
            if lastConfirmed.map({ now - $0 >= .seconds(1) }) ?? true {
                lastConfirmed = now
                lws_validity_confirmed(wsi)
            }
        }
        let piece = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
        switch assembler.receive(piece, binary: lws_frame_is_binary(wsi) != 0, final: lws_is_final_fragment(wsi) != 0) {
        case .pending:
            return 0
        case .message(let message):
            deliver(.message(message))
            return 0
        case .tooLarge:
            configuration.log(.warning, "a message from the server was over \(configuration.maxMessageSize) bytes; closing")
            sentClose = (1009, "too_large")
            var reason = Array("too_large".utf8)
            reason.withUnsafeMutableBufferPointer { r in
                lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, r.baseAddress, r.count)
            }
            return -1
        }
    }

    private func writeable(_ wsi: OpaquePointer) -> Int32 {
        let (next, more, close) = shared.withLock { s -> (OutgoingMessage?, Bool, (code: UInt16, reason: String)?) in
            guard !s.outbound.isEmpty else { return (nil, false, s.closeRequest) }
            let message = s.outbound.removeFirst()
            s.queuedBytes -= message.byteCount
            return (message, !s.outbound.isEmpty, s.closeRequest)
        }
        if let next {
            let frame = FrameBuffer(next, ordinal: 0)
            let kind = next.kind == .text ? LWS_WRITE_TEXT : LWS_WRITE_BINARY
            // One lws_write per WRITEABLE; lws keeps what the socket did not take.
            let n = lws_write(wsi, frame.payload, frame.payloadCount, kind)
            if n < frame.payloadCount { return -1 }
            if more || close != nil { lws_callback_on_writable(wsi) }
            return 0
        }
        if let close, sentClose == nil {
            sentClose = close
            // Bounded: a server that never answers the close is cut after the timeout.
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, Int32(max(1, configuration.closeTimeoutSeconds)))
            var reason = Array(close.reason.utf8.prefix(123))
            while !reason.isEmpty, String(validating: reason, as: UTF8.self) == nil { reason.removeLast() }
            reason.withUnsafeMutableBufferPointer { r in
                lws_close_reason(wsi, lws_close_status(UInt32(close.code)), r.baseAddress, r.count)
            }
            return -1
        }
        return 0
    }

    /// The code (network order, first two bytes) and reason of a close frame's payload.
    static func closePayload(_ input: UnsafeMutableRawPointer?, _ length: Int) -> (code: UInt16?, reason: String) {
        guard let input, length >= 2 else { return (nil, "") }
        let bytes = UnsafeRawBufferPointer(start: input, count: length)
        let code = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        return (code, String(decoding: bytes[2...], as: UTF8.self))
    }

    /// `name=value` of every `Set-Cookie` of the answer (lws keeps each header line as one
    /// fragment of the token; a cookie's attributes follow its first `;`).
    static func setCookies(_ wsi: OpaquePointer) -> [String] {
        var cookies: [String] = []
        for index in 0..<32 {
            let length = Int(lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_SET_COOKIE, Int32(index)))
            guard length > 0 else { break }
            guard length < 4096 else { continue }
            var buffer = [CChar](repeating: 0, count: length + 1)
            guard lws_hdr_copy_fragment(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_SET_COOKIE, Int32(index)) > 0 else { break }
            let text = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let pair = text.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces)
            if pair.contains("=") { cookies.append(pair) }
        }
        return cookies
    }

    /// The refusal's `Retry-After` in seconds (the delay form; a date is ignored).
    static func retryAfter(_ wsi: OpaquePointer) -> Int? {
        let length = Int(lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_RETRY_AFTER))
        guard length > 0, length < 64 else { return nil }
        var buffer = [CChar](repeating: 0, count: length + 1)
        guard lws_hdr_copy(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_RETRY_AFTER) > 0 else { return nil }
        let text = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return Int(text.trimmingCharacters(in: .whitespaces))
    }
}
