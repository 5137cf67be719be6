import CLibWebSockets
import Dispatch
import Foundation
import StenoSystem
import Synchronization

/// The libwebsockets server: one context, one vhost, HTTP and WebSocket on one
/// port, served by one dedicated thread.
///
/// ```swift
/// let transport = WebSocketTransport(configuration: config)
/// let sessions = Sessions(handle: transport.handle)   // a TransportDelegate
/// let port = try transport.start(delegate: sessions)
/// …
/// transport.stop()
/// ```
public final class WebSocketTransport: Sendable {
    public let configuration: TransportConfiguration
    /// Thread-safe operations on connections; valid before `start` (for wiring the
    /// delegate) and after `stop` (operations then do nothing).
    public let handle: TransportHandle
    private let run = Locked<RunState>(.idle)

    private enum RunState: Sendable {
        case idle
        case starting
        case running(loop: ServiceLoop, ended: DispatchSemaphore)
        case stopped
    }

    public enum StartError: Error, CustomStringConvertible, Equatable {
        case alreadyStarted
        case failed(String)

        public var description: String {
            switch self {
            case .alreadyStarted: "the transport was already started"
            case .failed(let why): why
            }
        }
    }

    public init(configuration: TransportConfiguration) {
        self.configuration = configuration
        handle = TransportHandle(outboundByteLimit: configuration.outboundByteLimit)
    }

    deinit {
        stop()
    }

    /// Creates the context on a new service thread and starts serving. Returns the
    /// bound port (the real one when the configuration says 0). The delegate is
    /// retained and from now on called only on the service thread.
    @discardableResult
    public func start(delegate: any TransportDelegate) throws -> Int {
        try run.withLock { state in
            guard case .idle = state else { throw StartError.alreadyStarted }
            state = .starting
        }
        installLwsLogging(configuration.log)
        announceLimits()
        let loop = ServiceLoop(configuration: configuration, handle: handle, delegate: delegate)
        let started = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<Int, StartError>?>(nil)
        let handle = self.handle
        // The thread lets go of the loop (and through it the delegate, and all the delegate
        // holds) before it says it ended: Foundation releases a thread's closure only as the
        // thread exits, after `stop` has returned, and a server's last reference dropped there
        // raced the process's exit (a Silero detector freed while exit() tore onnxruntime down).
        let serving = Locked<ServiceLoop?>(loop)
        let thread = Thread {
            // Named from inside (see `nameCurrentThread`), so that /proc tells this thread
            // from the workers.
            nameCurrentThread("steno-lws")
            Self.serve(serving, outcome: outcome, started: started)
            serving.withLock { $0 = nil }
            handle.serviceEnded()
            ended.signal()
        }
        thread.start()
        started.wait()

        switch outcome.withLock({ $0 }) {
        case .success(let port):
            run.withLock { $0 = .running(loop: loop, ended: ended) }
            return port
        case .failure(let error):
            ended.wait()
            run.withLock { $0 = .idle }
            throw error
        case nil:
            ended.wait()
            run.withLock { $0 = .idle }
            throw StartError.failed("the service thread ended without starting")
        }
    }

    /// The service thread's work: the context made (its port or its failure in `outcome`,
    /// then `started`), then served until stopped.
    private static func serve(_ serving: Locked<ServiceLoop?>, outcome: Locked<Result<Int, StartError>?>,
                              started: DispatchSemaphore) {
        guard let loop = serving.withLock({ $0 }) else { return }
        do {
            let port = try loop.createContext()
            outcome.withLock { $0 = .success(port) }
            started.signal()
            loop.serve()
        } catch {
            outcome.withLock { $0 = .failure(.failed(String(describing: error))) }
            started.signal()
        }
    }

    /// Raises the open-file limit (lws sizes its tables from it when the context is made) and
    /// logs it with the event loop: together they say how many connections can be held.
    private func announceLimits() {
        let log = configuration.log
        let limit = configuration.raiseOpenFileLimit ? OpenFileLimit.raise() : OpenFileLimit.current()
        var loop = "event loop: \(configuration.eventLoop)"
        if configuration.eventLoop == .poll, !EventLoop.libuv.isAvailable {
            loop += " (libuv's plugin \(EventLoop.libuv.pluginPath ?? "") is not installed)"
        }
        // Each connection is one descriptor; the process keeps a few dozen of its own (the
        // listening socket, lws's wake-up pipe, model files, logs).
        let room = limit.soft > 64 ? limit.soft - 64 : 0
        let line = "\(loop); open files: \(limit): room for about \(room) connections"
        if limit.soft < 4096 {
            log.warning(line + " (raise the hard limit: LimitNOFILE= in a systemd unit, ulimit -n in a shell)")
        } else {
            log.info(line)
        }
    }

    /// The bound port while running.
    public var port: Int? { handle.port }

    /// Stops serving: every connection is closed (the delegate hears `closed` for
    /// each, on the service thread), the context is destroyed, and the thread ends,
    /// holding nothing of the delegate's, before this returns. For a graceful end, drain
    /// first. Idempotent. Called from a delegate method it cannot wait: the server stops
    /// after that callback.
    public func stop() {
        let current = run.withLock { state -> RunState in
            let s = state
            if case .running = s { state = .stopped }
            return s
        }
        guard case .running(let loop, let ended) = current else { return }
        loop.stopRequested.store(true, ordering: .releasing)
        if handle.isServiceThread {
            // From a delegate method: the thread cannot wait for itself. It stops
            // once the current callback returns.
            configuration.log(.warning, "stop() called from the service thread; stopping without waiting")
            return
        }
        handle.wake()
        ended.wait()
        configuration.log(.info, "stopped")
    }
}
