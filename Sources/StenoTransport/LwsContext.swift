import CLibUVShims
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
    /// The retry and idle policy handed to the context (lws keeps the pointer for the
    /// context's life): all zero, so that lws keeps no validity timer per connection (see
    /// `ServiceLoop.keepAlive`).
    let idlePolicy: UnsafeMutablePointer<lws_retry_bo_t>
    /// An `lws_sorted_usec_list_t` followed by a pointer back to the loop (see
    /// `ServiceLoop.fromTickTimer`).
    let tickTimer: UnsafeMutableRawPointer
    /// The same layout, for the timer that starts closing handshakes (see
    /// `ServiceLoop.startClosingHandshakes`).
    let closeTimer: UnsafeMutableRawPointer
    /// Scratch for HTTP writes: `LWS_PRE` headroom plus one chunk.
    let httpScratch: UnsafeMutableRawPointer
    static let httpChunk = 32 * 1024
    /// The name of the second protocol (`protocols[1]`), which lws reads through this pointer
    /// (its vhost copies the protocols array, not the names): empty at rest; during one
    /// upgrade whose client offered only subprotocols Steno does not speak, the first of them,
    /// so that lws binds the connection instead of dropping it (see
    /// `ServiceLoop.unselectedSubprotocol`).
    let aliasName: UnsafeMutablePointer<CChar>
    static let aliasNameCapacity = 64
    /// The libuv loop lws runs on when `eventLoop` is `.libuv`: the transport's own ("foreign"
    /// to lws), so that the service thread runs it one turn at a time and lws installs no
    /// signal handlers of its own (it does on a loop it makes itself: SIGINT, SIGTERM, SIGHUP,
    /// SIGSEGV, SIGFPE). Freed by `ServiceLoop.serve` once lws has closed its handles on it.
    var uvLoop: UnsafeMutableRawPointer?
    /// `info.foreign_loops`: one loop per service thread (there is one), read at creation.
    let foreignLoops: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    /// `info.pcontext`: lws sets it to NULL once it has freed the context.
    let contextSlot: UnsafeMutablePointer<OpaquePointer?>

    init() {
        foreignLoops = .allocate(capacity: 2)
        foreignLoops.initialize(repeating: nil, count: 2)
        contextSlot = .allocate(capacity: 1)
        contextSlot.initialize(to: nil)
        protocols = .allocate(capacity: 3)
        protocols.initialize(repeating: lws_protocols(), count: 3)
        aliasName = .allocate(capacity: Self.aliasNameCapacity)
        aliasName.initialize(repeating: 0, count: Self.aliasNameCapacity)
        idlePolicy = .allocate(capacity: 1)
        idlePolicy.initialize(to: lws_retry_bo_t())
        tickTimer = .allocate(byteCount: Self.tickTimerSize, alignment: 16)
        tickTimer.initializeMemory(as: UInt8.self, repeating: 0, count: Self.tickTimerSize)
        closeTimer = .allocate(byteCount: Self.tickTimerSize, alignment: 16)
        closeTimer.initializeMemory(as: UInt8.self, repeating: 0, count: Self.tickTimerSize)
        httpScratch = .allocate(byteCount: steno_lws_pre + Self.httpChunk, alignment: 16)
    }

    deinit {
        protocols.deinitialize(count: 3)
        aliasName.deallocate()
        idlePolicy.deinitialize(count: 1)
        idlePolicy.deallocate()
        protocols.deallocate()
        for s in cStrings { free(s) }
        tickTimer.deallocate()
        closeTimer.deallocate()
        httpScratch.deallocate()
        foreignLoops.deallocate()
        contextSlot.deallocate()
        if let uvLoop { _ = steno_uv_loop_free(uvLoop) }
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

    /// Finishes destroying a context lws handed back half-destroyed, and closes the loop.
    private func discardFailedContext(_ ctx: OpaquePointer) {
        guard let loop = uvLoop else { return }
        // lws has closed its event pipe once already and would close it again on this run.
        steno_uv_forget_closing_pipes(loop)
        _ = steno_uv_run_until_done(loop)
        if contextSlot.pointee != nil { lws_context_destroy(ctx) }
        _ = steno_uv_loop_free(loop)
        uvLoop = nil
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
        // The same protocol under a name set per upgrade (see `aliasName`); its callback is
        // Steno's, so connections bound to it are served alike.
        protocols[1] = protocols[0]
        protocols[1].name = UnsafePointer(aliasName)

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
        switch cfg.eventLoop {
        case .poll:
            break
        case .libuv:
            // lws 4.1 loads the loop's plugin itself when it sees the option (from
            // LWS_INSTALL_LIBDIR); failing that, lws_create_context fails.
            guard cfg.eventLoop.isAvailable else {
                throw StartError.contextCreationFailed("the libuv event loop needs \(cfg.eventLoop.pluginPath ?? "its plugin") (Debian package libwebsockets-evlib-uv); use the poll loop without it")
            }
            guard let loop = steno_uv_loop_new() else {
                throw StartError.contextCreationFailed("could not make a libuv loop")
            }
            uvLoop = loop
            foreignLoops[0] = loop
            info.foreign_loops = foreignLoops
            options |= UInt64(LWS_SERVER_OPTION_LIBUV)
        }
        // Room for a request head of `maxRequestHeaderBytes` (lws's default is 4 KB, under what
        // browsers send with big cookies); Steno answers 431 above that limit itself.
        info.max_http_header_data2 = UInt32(cfg.headBufferBytes)
        info.pcontext = contextSlot
        info.options = options
        // No lws keepalive: its validity timers (and, without a policy, its default one of
        // 300 s) sit in one sorted list per thread that each rescheduling walks, which at
        // 10,000 connections costs more than everything else an idle server does (measured:
        // 64 % of its CPU; bench/README.md). A zero hang-up time turns them off; the service
        // loop pings and hangs up itself (`ServiceLoop.keepAlive`).
        info.retry_and_idle_policy = UnsafePointer(idlePolicy)

        contextSlot.pointee = nil
        guard let ctx = lws_create_context(&info) else {
            if let loop = uvLoop {
                // lws may have put handles on the loop before it failed: close them with it
                // (its event pipe, closed once already, kept from a second close).
                steno_uv_forget_closing_pipes(loop)
                _ = steno_uv_loop_free(loop)
                uvLoop = nil
            }
            throw StartError.contextCreationFailed("lws_create_context failed (\(cfg.eventLoop) loop) for \(host):\(cfg.port) (address in use, bad interface, or bad TLS files?)")
        }
        contextSlot.pointee = ctx
        let vhost = lws_get_vhost_by_name(ctx, "steno")
        if uvLoop != nil && vhost == nil {
            // On a foreign libuv loop, lws 4.1 returns a context it has already begun to
            // destroy when the vhost cannot be made (port taken, TLS files unreadable): its
            // handles close through the loop, so the loop runs until they have, and a second
            // destroy frees it.
            discardFailedContext(ctx)
            throw StartError.contextCreationFailed("lws_create_context failed (\(cfg.eventLoop) loop) for \(host):\(cfg.port) (address in use, bad interface, or bad TLS files?)")
        }
        let port = vhost.map { Int(lws_get_vhost_listen_port($0)) } ?? cfg.port
        return (ctx, port)
    }
}
