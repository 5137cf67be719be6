import CLibWebSockets
import CLwsShims
import Foundation

/// The C memory a libwebsockets context keeps pointers to for its whole life (the protocols
/// array, the C strings of the creation info, the idle policy, the tick timer, the HTTP
/// write scratch), and the making of the context from a `TransportConfiguration`. Freed in
/// `deinit`, after the context was destroyed (its owner, `ServiceLoop`, outlives it).
final class LwsContextStorage {
    let protocols: UnsafeMutablePointer<lws_protocols>
    private var cStrings: [UnsafeMutablePointer<CChar>] = []
    /// The idle policy handed to the context: lws keeps the pointer for the context's life.
    let idlePolicy: UnsafeMutablePointer<lws_retry_bo_t>
    /// An `lws_sorted_usec_list_t` followed by a pointer back to the loop (see
    /// `ServiceLoop.fromTickTimer`).
    let tickTimer: UnsafeMutableRawPointer
    /// Scratch for HTTP writes: `LWS_PRE` headroom plus one chunk.
    let httpScratch: UnsafeMutableRawPointer
    static let httpChunk = 32 * 1024

    init() {
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        idlePolicy = .allocate(capacity: 1)
        idlePolicy.initialize(to: lws_retry_bo_t())
        tickTimer = .allocate(byteCount: Self.tickTimerSize, alignment: 16)
        tickTimer.initializeMemory(as: UInt8.self, repeating: 0, count: Self.tickTimerSize)
        httpScratch = .allocate(byteCount: steno_lws_pre + Self.httpChunk, alignment: 16)
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

    enum StartError: Error, CustomStringConvertible {
        case contextCreationFailed(String)
        var description: String {
            switch self {
            case .contextCreationFailed(let why): "could not start the server: \(why)"
            }
        }
    }

    /// Creates the context, `user` being what the callbacks get back from
    /// `lws_context_user`; returns it and the bound port.
    func makeContext(_ cfg: TransportConfiguration, user: UnsafeMutableRawPointer) throws -> (OpaquePointer, Int) {
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
        info.user = user
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
        var port = cfg.port
        if let vh = lws_get_vhost_by_name(ctx, "steno") {
            port = Int(lws_get_vhost_listen_port(vh))
        }
        return (ctx, port)
    }
}
