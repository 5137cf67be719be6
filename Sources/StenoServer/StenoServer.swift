import Dispatch
import StenoCore
import StenoRedis
import StenoSession
import StenoSpeech
import StenoSystem
import StenoTransport
import StenoWorkers

#if canImport(Glibc)
import Glibc
#endif

/// The captioning server: the transport (libwebsockets on its own thread), the worker pool,
/// the speech engine and the session layer, put together. `steno serve` runs one; tests run
/// them in-process on 127.0.0.1, port 0.
public final class StenoServer: Sendable {
    public static let version = "0.1.0"

    public let options: ServerOptions
    public let metrics: StenoMetrics
    private let transport: WebSocketTransport
    private let pool: WorkerPool
    private let context: ServerContext
    private let sessions = SessionRegistry()
    private let log: Log
    /// Channels across instances, with `options.redis`.
    private let relay: ChannelRelay?

    /// Builds a server. The engine is shared by all sessions (each gets its own recognizer).
    public init(options: ServerOptions, engine: any SpeechEngine, log: Log = Log()) {
        self.options = options
        self.log = log
        let metrics = StenoMetrics()
        self.metrics = metrics
        let pool = WorkerPool(workers: max(1, options.workers), name: "steno")
        metrics.attach(pool: pool)
        metrics.attach(engine: engine)
        self.pool = pool

        var configuration = TransportConfiguration(
            host: options.host, port: options.port,
            maxMessageSize: options.limits.maxFrameBytes, outboundByteLimit: options.limits.outboundBytes)
        configuration.tlsCertificatePath = options.tls?.certificatePath
        configuration.tlsKeyPath = options.tls?.privateKeyPath
        configuration.keepAliveSeconds = options.keepAlive.map { Int($0.inSeconds.rounded()) } ?? 0
        configuration.writeStallSeconds = options.writeStall?.inSeconds ?? 0
        configuration.serverName = "steno/\(Self.version)"
        configuration.maxUnfinishedHeadsPerAddress = options.maxHandshakingPerAddress
        configuration.unfinishedHeadsMemory = options.handshakeMemory
        configuration.unfinishedMessagesMemory = options.messageMemory
        configuration.unfinishedMessagesPerAddress = options.messageMemoryPerAddress
        configuration.unlimitedAddresses += options.trustedProxies
        if let loop = options.eventLoop { configuration.eventLoop = loop }
        configuration.log = log
        let transport = WebSocketTransport(configuration: configuration)
        self.transport = transport

        let info = engine.info
        var sessionConfiguration = SessionConfiguration(engine: info.announced, limits: options.limits)
        sessionConfiguration.models = engine.servedModels
        sessionConfiguration.profanity = options.profanity
        var context = ServerContext(
            handle: transport.handle,
            engine: engine,
            pool: pool,
            metrics: metrics,
            log: log,
            channels: ChannelHub(handle: transport.handle, metrics: metrics, maxPastBroadcasts: options.pastBroadcasts,
                                 layout: options.captionLayout, hls: options.hls),
            sessions: sessions,
            sessionConfiguration: sessionConfiguration)
        context.driver = DriverOptions(batchSeconds: options.audioBatchSeconds, keepsDecoder: options.dedicatedRecognizers)
        context.resumeRetainedBytes = options.resumeRetainedBytes
        self.context = context
        relay = options.redis.map {
            ChannelRelay(url: $0, settings: .init(lease: options.channelLease, leaseRenewal: options.channelLease / 3), log: log)
        }
        context.channels.relay = relay
        metrics.attach(sessions: sessions)
    }

    /// Starts listening; returns the port (the real one when `options.port` is 0). The
    /// engine's shared decoders (or `spareRecognizers` of them) are made in the background
    /// meanwhile.
    @discardableResult
    public func start() throws -> Int {
        let engine = context.engine
        let spares = options.spareRecognizers ?? options.recognizers
        DispatchQueue.global(qos: .utility).async {
            do throws(StenoError) { try engine.prepare(sessions: spares) } catch {}
        }
        let service = Router(context: context, options: options, registry: sessions)
        let port = try transport.start(delegate: service)
        if let relay {
            let sessions = self.sessions
            relay.start(hub: context.channels) { session, channel in
                sessions.session(id: session)?.channelTakenElsewhere(channel)
            }
            log.info("channels across instances through \(relay.url) (this instance: \(relay.instance))")
        }
        // Where it listens is announced once, by whoever started it (`steno serve` prints it).
        log.info("serving with \(options.workers) workers, at most \(options.maxSessions) sessions")
        return port
    }

    /// The port, once started.
    public var port: Int? { transport.port }

    /// Open `/v1/stream` sessions.
    public var sessionCount: Int { sessions.count }

    /// Graceful shutdown: refuse new connections (`/healthz` answers 503), finalize every
    /// session and deliver its finals (to its channel's viewers too), close the sessions and
    /// then the viewers with 1001, then stop. Sessions still open after `timeout` seconds are
    /// closed at once. Returns true when every session finished within the timeout.
    @discardableResult
    public func drain(timeout: Double) -> Bool {
        transport.handle.perform { delegate in (delegate as? Router)?.startDraining() }
        let deadline = SystemClock.now() + max(0, timeout)
        while sessions.liveCount > 0 && SystemClock.now() < deadline {
            usleep(20_000)
        }
        let clean = sessions.liveCount == 0
        if !clean {
            log.warning("drain timeout: closing \(sessions.liveCount) sessions now")
            for session in sessions.all { session.input(.shutdownDeadline) }
        }
        // Broadcast viewers last, once the publishers' finals were queued for them.
        for viewer in context.channels.viewers {
            transport.handle.close(viewer, code: 1001, reason: "shutting_down")
        }
        // Let the close frames (and the finals before them) reach the clients: for as long as
        // connections keep closing (with thousands, the transport takes seconds: it runs a
        // few hundred closing handshakes at a time), until `Self.flushGrace` passes with none
        // closing, and for no longer than the drain timeout.
        let flushCap = SystemClock.now() + max(Self.flushGrace, timeout)
        var flushDeadline = SystemClock.now() + Self.flushGrace
        var open = transport.handle.connectionCount
        while open > 0 && SystemClock.now() < min(flushDeadline, flushCap) {
            usleep(20_000)
            let now = transport.handle.connectionCount
            if now < open { flushDeadline = SystemClock.now() + Self.flushGrace }
            open = now
        }
        // The other instances' viewers get the last finals and the broadcasts' end too.
        relay?.stop(flush: 2)
        stop()
        return clean
    }

    /// How long the drain waits for the next connection to close before it stops: longer than
    /// lws's own wait for the answer to a close frame (5 s), after which it closes the
    /// connection itself. It was 2 s, which 10,000 sessions closing at once outran on a busy
    /// machine: the first close frames were still being queued 2 s after the sessions ended,
    /// the drain took that for no progress, and every client was cut without its 1001.
    static let flushGrace = 6.0

    /// Stops at once: connections are dropped, the pool's threads end.
    public func stop() {
        relay?.stop()
        transport.stop()
        if !pool.shutdown(.drain, timeout: .seconds(2)) {
            pool.shutdown(.immediate)
        }
    }
}
