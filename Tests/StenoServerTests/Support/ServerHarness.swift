import Foundation
import StenoCore
import StenoSpeech
import StenoSystem
import Testing
@testable import StenoServer

#if canImport(Glibc)
import Glibc
import StenoTestSupport
#endif

// End-to-end test support: a real `StenoServer` on 127.0.0.1 (port 0) with the real
// pocketsphinx engine. The rest of it, beside this file: the test speech and inputs
// (TestSpeech.swift), the events and `LocalSession` references (WireEvents.swift), the
// protocol-level client on top of `WebSocketTestClient` (StenoClient.swift), the checks of
// a session (SessionChecks.swift), threads and polling (Threads.swift).

// MARK: - Engine

/// One engine for every end-to-end test in the process: the model is loaded once and its
/// decoders are shared by the sessions (≈0.5 s and ≈95 MB each).
enum SharedEngine {
    static let engine: PocketSphinxEngine = {
        do throws(StenoError) {
            return try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 12))
        } catch {
            fatalError("the pocketsphinx model cannot be loaded: \(error.message)")
        }
    }()
}

// MARK: - Server

/// Lines a server logged, readable from the test.
final class LogLines: Sendable {
    private let lines = Locked<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
    func contains(_ text: String) -> Bool { all.contains { $0.contains(text) } }
}

/// A real server on 127.0.0.1, any free port, with the shared engine.
final class LiveServer {
    let server: StenoServer
    let port: Int
    let log = LogLines()
    private var stopped = false

    /// Tests get generous defaults (no idle timeout, room for parallel sessions); `configure`
    /// changes what a test is about.
    init(engine: any SpeechEngine = SharedEngine.engine, _ configure: (inout ServerOptions) -> Void = { _ in }) throws {
        var options = ServerOptions()
        options.host = "127.0.0.1"
        options.port = 0
        options.maxSessions = 16
        options.limits.idleTimeoutSeconds = 0
        options.webRoot = Self.webClient
        // Test clients answer pings only while they read, and many wait on one thread while
        // another does the work; on a loaded machine that can outlast the keepalive. The
        // keepalive tests turn it on.
        options.keepAlive = nil
        // A client that vanishes would hold its session for the resume grace period; the
        // resume tests turn it on.
        options.limits.resumeSeconds = 0
        // Clients on a loaded machine can pause mid-speech for longer than the 2 s after which
        // a stalled utterance is finalized, and tests compare with whole-file references; the
        // stall tests turn it down.
        options.limits.stallSeconds = 30
        // Many tests stream in parallel on a busy machine; admission by load has its own tests.
        options.lagTarget = 0
        options.workers = 2
        // Decoders made ahead at start (ServerOptions' default follows the machine).
        options.recognizers = 4
        configure(&options)
        let lines = log
        server = StenoServer(options: options, engine: engine,
                             log: Log(minimum: .debug, sink: { lines.append($0) }))
        port = try server.start()
    }

    /// The package's `web-client/` (this file is `Tests/StenoServerTests/Support/` below the root).
    static let webClient: String = {
        var path = #filePath
        for _ in 0..<4 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        return path + "/web-client"
    }()

    deinit { stop() }

    func stop() {
        guard !stopped else { return }
        stopped = true
        server.stop()
    }

    /// Starts a drain (see `StenoServer.drain`) on another thread; the server is stopped at
    /// its end. `wait()` returns what the drain returned.
    func startDraining(timeout: Double) -> BackgroundJob<Bool> {
        stopped = true
        let server = self.server
        return BackgroundJob { server.drain(timeout: timeout) }
    }

    func get(_ path: String, headers: [(String, String)] = []) throws -> TestHTTPResponse {
        try HTTPTestClient.get(port: port, path, headers: headers)
    }

    /// `/metrics` as series → value (`name{labels}` as written).
    func metrics() throws -> [String: Double] {
        let response = try get("/metrics")
        guard response.status == 200 else { throw TestClientError.protocolError("/metrics: HTTP \(response.status)") }
        return Self.parseMetrics(response.bodyText)
    }

    static func parseMetrics(_ text: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        return values
    }

    func connect(path: String = "/v1/stream", headers: [(String, String)] = [],
                 receiveBufferSize: Int? = nil, sendBufferSize: Int? = nil) throws -> StenoClient {
        try StenoClient(port: port, path: path, headers: headers,
                        receiveBufferSize: receiveBufferSize, sendBufferSize: sendBufferSize)
    }
}
