import CLibUVShims
import CLibWebSockets
import CLwsShims
import Foundation
import StenoCore
import Synchronization

/// A WebSocket connection as the service thread sees it.
final class LiveConnection {
    let id: ConnectionID
    let wsi: OpaquePointer
    /// The peer's address, normalized (`MessageBudget`).
    let address: String
    /// The message being received, in pieces.
    var assembler: MessageAssembler
    /// How far a requested close has got on this thread (the request itself, code and reason,
    /// is the shared state's: `SharedConnection.closeRequest`).
    var closing: Closing?
    /// When the peer was last heard from (any frame, a pong included): keepalive.
    var lastHeard: ContinuousClock.Instant
    /// A ping went out since then.
    var pinged = false
    /// Reading is paused (flow control): whatever the peer sends waits in the socket, so
    /// its silence proves nothing and the keepalive leaves it alone.
    var readingPaused = false
    /// Since when outbound data has waited with nothing written (`ServiceLoop.scanConnections`).
    var stalledSince: ContinuousClock.Instant?
    /// A ping is to be written at the next WRITEABLE.
    var pingDue = false
    /// When the last ping to a peer whose reading is paused went out (`pausedHeartbeat`).
    var heartbeatAt: ContinuousClock.Instant?
    /// The close frame's code and reason were handed to lws (`lws_close_reason`) and the
    /// closing handshake waits to be started outside this connection's callbacks.
    var closeFrameDue = false

    enum Closing {
        /// Writing what was queued, then the close frame; cut at the deadline.
        case flushing(deadline: ContinuousClock.Instant)
        /// The deadline passed: the connection is being cut without a close frame.
        case cut
    }

    init(id: ConnectionID, wsi: OpaquePointer, address: String = "", maxMessageSize: Int) {
        self.id = id
        self.wsi = wsi
        self.address = PeerAddress.normalized(address)
        self.assembler = MessageAssembler(limit: maxMessageSize)
        self.lastHeard = .now
    }
}

/// An HTTP response being written in pieces, one `lws_write` per HTTP_WRITEABLE.
/// A POST whose body is being read, then, once handed to the delegate, waiting for its answer.
final class PendingHTTPBody {
    let request: HTTPRequest
    let exchange: HTTPExchange
    var body: [UInt8] = []
    init(request: HTTPRequest, exchange: HTTPExchange, expected: Int) {
        self.request = request
        self.exchange = exchange
        body.reserveCapacity(expected)
    }
}

final class PendingHTTPResponse {
    var bytes: [UInt8]
    var offset = 0
    let closeAfter: Bool
    /// A body still being written (`TransportHandle.write`): the connection waits for more,
    /// and closes once the last piece is written (the body has no length).
    var streaming: Bool

    init(bytes: [UInt8], closeAfter: Bool, streaming: Bool = false) {
        self.bytes = bytes
        self.closeAfter = closeAfter
        self.streaming = streaming
    }
}

/// delegate is reached only from here.
final class ServiceLoop: @unchecked Sendable {
    let configuration: TransportConfiguration
    let handle: TransportHandle
    let delegate: any TransportDelegate
    let stopRequested = Atomic<Bool>(false)

    var context: OpaquePointer?
    var connections: [ConnectionID: LiveConnection] = [:]
    var closing: Set<ConnectionID> = []
    /// Accepted upgrades between HTTP_CONFIRM_UPGRADE and ESTABLISHED, by wsi.
    var pendingUpgrades: [OpaquePointer: UpgradeRequest] = [:]
    /// The upgrade being confirmed names its first offered subprotocol in its 101
    /// (`UpgradeDecision.acceptNaming`): the alias keeps its name until lws has written it.
    var namingSubprotocol = false
    /// Connections still sending their first request head (`ServiceLoop+Heads`).
    var heads: HeadBudget
    /// Bytes of messages being assembled (`ServiceLoop+WebSocket`'s `receive`).
    var messages: MessageBudget
    var httpResponses: [OpaquePointer: PendingHTTPResponse] = [:]
    /// POSTs being read, by wsi; and those whose answer the delegate gives later, by exchange.
    var httpBodies: [OpaquePointer: PendingHTTPBody] = [:]
    var httpExchanges: [HTTPExchange: OpaquePointer] = [:]
    var nextExchange: UInt64 = 0
    var nextID: UInt64 = 1
    private var drainingCommands = false
    /// Connections whose closing handshake `startClosingHandshakes` starts next.
    var handshakesToStart: [ConnectionID] = []
    /// Closing handshakes started whose connection has not closed yet. lws keeps a timeout
    /// for each (5 s for the close frame to go, 5 s for the answer) in one sorted list that
    /// every insertion walks from its start: 10,000 started at once (a drain) took the
    /// service thread seconds of walking (perf: `lws_dll2_add_sorted`) before the first
    /// close frame went out. At most `closingHandshakesAtOnce` are under way; the next start
    /// as those finish.
    var handshakesUnderWay: Set<ConnectionID> = []
    static let closingHandshakesAtOnce = 256
    private var closeTimerScheduled = false
    /// Sockets of closed connections kept open a while, read and discarded (`LingeringCloses`).
    let lingering = LingeringCloses()
    var lastScan = ContinuousClock.now

    /// C memory lws keeps pointers to for the context's life.
    let storage = LwsContextStorage()

    init(configuration: TransportConfiguration, handle: TransportHandle, delegate: any TransportDelegate) {
        self.configuration = configuration
        self.handle = handle
        self.delegate = delegate
        self.heads = HeadBudget(perAddress: configuration.maxUnfinishedHeadsPerAddress,
                                total: configuration.unfinishedHeadsMemory > 0 ? max(1, configuration.unfinishedHeadsMemory / configuration.headBufferBytes) : 0,
                                exempt: Set(configuration.unlimitedAddresses))
        self.messages = MessageBudget(total: configuration.unfinishedMessagesMemory,
                                      perAddress: configuration.unfinishedMessagesPerAddress,
                                      exempt: Set(configuration.unlimitedAddresses))
    }

    // MARK: - Life cycle (on the service thread)

    /// Creates the context; returns the bound port.
    func createContext() throws -> Int {
        let (ctx, port) = try storage.makeContext(configuration, user: Unmanaged.passUnretained(self).toOpaque())
        context = ctx
        handle.serviceStarted(context: ctx, port: port)
        return port
    }

    /// Serves until `stop` is requested, then destroys the context.
    func serve() {
        guard let ctx = context else { return }
        scheduleTick()
        drainCommands()  // anything posted before the thread started
        if let loop = storage.uvLoop {
            // One turn of libuv at a time: it waits in epoll for any socket, the wake-up
            // (`lws_cancel_service`) or lws's timer, and returns once it has handled them.
            while !stopRequested.load(ordering: .acquiring) {
                _ = steno_uv_run_once(loop)
            }
        } else {
            while !stopRequested.load(ordering: .acquiring) {
                if lws_service(ctx, 0) < 0 {
                    configuration.log(.error, "lws_service failed; the server stops serving")
                    break
                }
            }
        }
        lws_sul_cancel(storage.tickTimer.assumingMemoryBound(to: lws_sorted_usec_list_t.self))
        lws_sul_cancel(storage.closeTimer.assumingMemoryBound(to: lws_sorted_usec_list_t.self))
        handle.serviceStopping()
        // lws closes its event pipe twice on libuv; `steno_uv_forget_event_pipe` keeps the
        // second close off whatever another thread opened meanwhile (see steno_uv.c).
        let eventPipe = storage.uvLoop.map { steno_uv_find_event_pipe($0) }
        // Destroying the context closes every connection; their CLOSED callbacks
        // (and the delegate's `closed`) run here, on this thread.
        lws_context_destroy(ctx)
        lingering.closeAll()
        if let loop = storage.uvLoop {
            if let eventPipe, eventPipe.fd >= 0, steno_uv_forget_event_pipe(loop, eventPipe) == 0 {
                configuration.log(.debug, "libwebsockets' event pipe may be closed twice (descriptor \(eventPipe.fd))")
            }
            // On a loop of ours, lws closes its libuv handles asynchronously: the loop must
            // run until they are all closed (each connection's WSI_DESTROY comes then), and
            // a second lws_context_destroy frees the context (lws clears `pcontext` when it
            // has). Then the loop itself is closed.
            _ = steno_uv_run_until_done(loop)
            if storage.contextSlot.pointee != nil { lws_context_destroy(ctx) }
            if storage.contextSlot.pointee != nil {
                configuration.log(.warning, "libwebsockets did not finish destroying its context")
            }
            let left = steno_uv_open_handles(loop)
            if left > 0 { configuration.log(.warning, "\(left) libuv handles were still open after the context was destroyed") }
            if steno_uv_loop_free(loop) != 0 {
                configuration.log(.warning, "the libuv loop could not be closed")
            }
            storage.uvLoop = nil
        }
        context = nil
        connections.removeAll()
        pendingUpgrades.removeAll()
        httpResponses.removeAll()
        httpBodies.removeAll()
        httpExchanges.removeAll()
    }

    // MARK: - Ticks (lws sul timer on this thread)

    private func scheduleTick() {
        guard let ctx = context else { return }
        let tickTimer = storage.tickTimer
        let sul = tickTimer.assumingMemoryBound(to: lws_sorted_usec_list_t.self)
        tickTimer.storeBytes(of: Unmanaged.passUnretained(self).toOpaque(),
                             toByteOffset: MemoryLayout<lws_sorted_usec_list_t>.stride,
                             as: UnsafeMutableRawPointer.self)
        let us = lws_usec_t(max(0.001, configuration.tickInterval) * 1_000_000)
        lws_sul_schedule(ctx, 0, sul, stenoTickCallback, us)
    }

    // MARK: - Closing handshakes (lws sul timer on this thread)

    /// Starts the closing handshake of `c`, whose close code and reason lws already has, from
    /// outside its callbacks. Returning -1 from the callback would be the usual way, but
    /// Debian's lws 4.1.6 is built with `_DEBUG`, and then, on the libuv loop, a callback's -1
    /// closes the connection twice in a row ("close_and_handled uv repeat test" in
    /// `lws_service_fd_tsi`): the first close queues the close frame, the second finds the
    /// frame pending and drops the connection without it. A close started from a timer
    /// (`LWS_TO_KILL_SYNC`) is made once, on either loop, and sends the frame.
    func scheduleClosingHandshake(_ c: LiveConnection) {
        c.closeFrameDue = true
        handshakesToStart.append(c.id)
        scheduleCloseTimer()
    }

    /// Schedules `startClosingHandshakes` as soon as possible. From a connection's CLOSED
    /// callback (`finish`), which on libuv comes from a libuv close callback, lws does not
    /// re-arm its timer for a new entry until something else wakes it: the wake-up here
    /// (`lws_cancel_service`) has it look at its timers at once.
    func scheduleCloseTimer() {
        guard !closeTimerScheduled, !stopRequested.load(ordering: .acquiring), let ctx = context else { return }
        closeTimerScheduled = true
        let closeTimer = storage.closeTimer
        closeTimer.storeBytes(of: Unmanaged.passUnretained(self).toOpaque(),
                              toByteOffset: MemoryLayout<lws_sorted_usec_list_t>.stride,
                              as: UnsafeMutableRawPointer.self)
        lws_sul_schedule(ctx, 0, closeTimer.assumingMemoryBound(to: lws_sorted_usec_list_t.self),
                         stenoCloseTimerCallback, 1)
        lws_cancel_service(ctx)
    }

    func startClosingHandshakes() {
        closeTimerScheduled = false
        var taken = 0
        while taken < handshakesToStart.count && handshakesUnderWay.count < Self.closingHandshakesAtOnce {
            let id = handshakesToStart[taken]
            taken += 1
            guard let c = connections[id], c.closeFrameDue else { continue }
            if case .cut? = c.closing { continue }
            handshakesUnderWay.insert(id)
            // lws writes the close frame at the next WRITEABLE and waits for the peer's (5 s).
            lws_set_timeout(c.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC)
        }
        handshakesToStart.removeFirst(taken)
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
                // One whose queue has flushed (its close frame is due) waits only for its turn
                // among the closing handshakes: not a client that does not read. Cutting those
                // cut the last thousand of a 10,000-session drain.
                guard let c = connections[id], !c.closeFrameDue, case .flushing(let deadline)? = c.closing,
                      now >= deadline else { continue }
                // The queue did not flush in time (a client that does not read):
                // cut the connection without waiting for a close frame to get out.
                c.closing = .cut
                configuration.log(.info, "connection \(id) did not flush before closing; cut")
                lws_set_timeout(c.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            }
        }
        // Closing handshakes waiting for their turn, in case no connection's close has
        // scheduled them since.
        if !handshakesToStart.isEmpty && handshakesUnderWay.count < Self.closingHandshakesAtOnce {
            startClosingHandshakes()
        }
        scanConnections()
        lingering.service(seconds: configuration.closeLingerSeconds, log: configuration.log)
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
                case .close(let id):
                    guard let c = connections[id], c.closing == nil else { continue }
                    c.closing = .flushing(deadline: ContinuousClock.now + .milliseconds(Int(configuration.closeFlushTimeout * 1000)))
                    closing.insert(id)
                    messages.change(-c.assembler.buffered, for: c.address)
                    c.assembler.reset()
                    // Read again (and discard) so the client's close frame is seen and
                    // the closing handshake can finish.
                    setReading(c, true)
                    lws_callback_on_writable(c.wsi)
                case .kill(let id):
                    guard let c = connections[id] else { continue }
                    c.closing = .cut
                    closing.insert(id)
                    lws_set_timeout(c.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
                case .setReading(let id, let reading):
                    if let c = connections[id] { setReading(c, reading) }
                case .perform(let body):
                    body(delegate)
                case .respond(let exchange, let response, let streaming):
                    guard let wsi = streaming ? httpExchanges[exchange] : httpExchanges.removeValue(forKey: exchange) else { continue }
                    httpBodies[wsi] = nil
                    if startHTTPResponse(wsi, response, includeBody: !streaming, close: streaming, streaming: streaming) != 0 {
                        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
                    }
                case .write(let exchange, let bytes, let final):
                    guard let wsi = final ? httpExchanges.removeValue(forKey: exchange) : httpExchanges[exchange],
                          let pending = httpResponses[wsi] else { continue }
                    pending.bytes += bytes
                    if final { pending.streaming = false }
                    lws_callback_on_writable(wsi)
                }
            }
        }
    }

    /// lws applies a flow-control change for the wsi whose callback is running when
    /// that callback returns; for any other wsi the change must be forced now
    /// (LWS_RXFLOW_REASON_FLAG_PROCESS_NOW), as lws-misc.h says.
    func setReading(_ c: LiveConnection, _ reading: Bool) {
        if c.readingPaused && reading {
            // What it sent meanwhile comes now; until it does, the peer has not been silent.
            c.lastHeard = .now
            c.pinged = false
            c.heartbeatAt = nil
        }
        c.readingPaused = !reading
        setReading(c.wsi, reading)
    }

    func setReading(_ wsi: OpaquePointer, _ reading: Bool) {
        var flags = Int32(LWS_RXFLOW_REASON_APPLIES | LWS_RXFLOW_REASON_USER_BOOL)
        if reading { flags |= Int32(LWS_RXFLOW_REASON_APPLIES_ENABLE_BIT) }
        if wsi != currentWSI { flags |= Int32(LWS_RXFLOW_REASON_FLAG_PROCESS_NOW) }
        lws_rx_flow_control(wsi, flags)
    }

    // MARK: - Callback dispatch

    /// The wsi whose callback is running (callbacks can nest).
    var currentWSI: OpaquePointer?
    // (The dispatch itself, `callback`, is in ServiceLoop+Callbacks.swift.)
}
