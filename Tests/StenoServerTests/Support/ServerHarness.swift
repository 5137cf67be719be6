import COpus
import COpusShims
import Foundation
import StenoAudio
import StenoCore
import StenoSession
import StenoSpeech
import StenoSystem
import Testing
@testable import StenoServer

#if canImport(Glibc)
import Glibc
import StenoTestSupport
#endif

// End-to-end test support: a real `StenoServer` on 127.0.0.1 (port 0) with the real
// pocketsphinx engine, a protocol-level client on top of `WebSocketTestClient`, the test
// speech, and `LocalSession` references to compare the server's finals with.

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

// MARK: - Audio

/// The test speech (copied into Resources/ from the project's other test resources) and
/// the wire forms made from it.
enum Speech {
    /// Samuel Beckett, 16 kHz mono, 9.97 s: "ever try it | as the files | no matter |
    /// try again fail again | fail that ah" (what pocketsphinx hears).
    static let beckett16k: [Float] = load("beckett.wav", rate: 16000)
    /// A line from Endgame, 24 kHz mono, 3.6 s.
    static let endgame24k: [Float] = load("endgame_24k.wav", rate: 24000)

    static func load(_ name: String, rate: Int) -> [Float] {
        guard let url = Bundle.module.url(forResource: "Resources/\(name)", withExtension: nil) else {
            fatalError("missing test resource \(name)")
        }
        do throws(StenoError) {
            let wav = try WAVFile(path: url.path)
            precondition(wav.sampleRate == rate && wav.channels == 1, "\(name): \(wav.sampleRate) Hz, \(wav.channels) channels")
            return wav.samples
        } catch {
            fatalError("\(name): \(error.message)")
        }
    }

    /// `samples` at another rate, through StenoAudio's soxr resampler.
    static func resample(_ samples: [Float], from input: Int, to output: Int) -> [Float] {
        do throws(StenoError) {
            let resampler = try Resampler(inputRate: input, outputRate: output)
            return resampler.process(samples) + resampler.flush()
        } catch {
            fatalError("resampler \(input) → \(output): \(error.message)")
        }
    }

    /// 16-bit little-endian PCM (mono).
    static func s16le(_ samples: [Float]) -> [UInt8] {
        WAVFile(sampleRate: 16000, channels: 1, samples: samples).s16leBytes
    }

    /// `bytes` cut into messages of `size` bytes (the last may be shorter).
    static func split(_ bytes: [UInt8], every size: Int) -> [[UInt8]] {
        stride(from: 0, to: bytes.count, by: size).map { Array(bytes[$0..<min($0 + size, bytes.count)]) }
    }

    /// PCM s16le messages of `milliseconds` of audio at `rate`.
    static func pcmMessages(_ samples: [Float], rate: Int, milliseconds: Int = 100) -> [[UInt8]] {
        split(s16le(samples), every: 2 * max(1, rate * milliseconds / 1000))
    }

    /// Opus packets of 20 ms (one per message) from 48 kHz mono samples, made by libopus.
    static func opusPackets(_ samples48k: [Float], bitrate: Int32 = 32000) -> [[UInt8]] {
        var error: Int32 = 0
        guard let encoder = opus_encoder_create(48000, 1, OPUS_APPLICATION_VOIP, &error), error == OPUS_OK else {
            fatalError("opus_encoder_create: \(error)")
        }
        defer { opus_encoder_destroy(encoder) }
        _ = steno_opus_encoder_set_bitrate(encoder, bitrate)
        let frameSize = 960
        var packets: [[UInt8]] = []
        var frame = [Float](repeating: 0, count: frameSize)
        var buffer = [UInt8](repeating: 0, count: 4000)
        var start = 0
        while start < samples48k.count {
            let take = min(frameSize, samples48k.count - start)
            for i in 0..<frameSize { frame[i] = i < take ? samples48k[start + i] : 0 }
            let length = opus_encode_float(encoder, frame, Int32(frameSize), &buffer, Int32(buffer.count))
            precondition(length > 0, "opus_encode_float: \(length)")
            packets.append(Array(buffer[0..<Int(length)]))
            start += frameSize
        }
        return packets
    }

    /// Beckett as s16le at 16 kHz in 100 ms messages.
    static let beckettMessages = pcmMessages(beckett16k, rate: 16000)
}

/// Audio to send: the `start` format, the messages, and how long it is.
struct TestInput: Sendable {
    var name: String
    var format: AudioFormat
    var messages: [[UInt8]]

    /// Seconds on the session timeline: PCM frames / rate, dropping messages that are not
    /// whole frames; for Opus each packet's duration from its header (a packet without a
    /// readable header counts as long as the last good one, as the server counts it).
    var duration: Double {
        switch format.encoding {
        case .opus:
            var samples = 0
            var last = 960
            for packet in messages {
                if let n = OpusPacket.samples(packet) { last = n }
                samples += last
            }
            return Double(samples) / Double(OpusPacket.sampleRate)
        default:
            let frame = format.bytesPerFrame ?? 2
            let bytes = messages.reduce(0) { $0 + ($1.count % frame == 0 ? $1.count : 0) }
            return Double(bytes / frame) / Double(format.sampleRate)
        }
    }

    /// Messages up to `seconds` of audio (whole messages), and the rest.
    func split(at seconds: Double) -> (before: [[UInt8]], after: [[UInt8]], at: Double) {
        var t = 0.0
        var index = 0
        while index < messages.count && t < seconds - 1e-9 {
            t += messageDuration(messages[index])
            index += 1
        }
        return (Array(messages[..<index]), Array(messages[index...]), t)
    }

    func messageDuration(_ message: [UInt8]) -> Double {
        if format.encoding == .opus { return 0.02 }
        return Double(message.count / (format.bytesPerFrame ?? 2)) / Double(format.sampleRate)
    }

    var startMessage: String { StartMessage.text(format) }

    static func pcm16k(_ name: String = "beckett", _ samples: [Float] = Speech.beckett16k) -> TestInput {
        TestInput(name: name, format: AudioFormat.pcm(16000), messages: Speech.pcmMessages(samples, rate: 16000))
    }
}

extension AudioFormat {
    static func pcm(_ rate: Int, encoding: AudioEncoding = .pcmS16LE, channels: Int = 1) -> AudioFormat {
        do throws(StenoError) {
            return try AudioFormat(encoding: encoding, sampleRate: rate, channels: channels)
        } catch {
            fatalError(error.message)
        }
    }
}

enum StartMessage {
    /// A `start` message for `format`; `extra` is more members, e.g. `"channel":"a"`.
    static func text(_ format: AudioFormat, extra: String = "") -> String {
        var text = #"{"type":"start","audio":{"encoding":"\#(format.encoding.rawValue)","#
        text += #""sampleRate":\#(format.sampleRate),"channels":\#(format.channels)},"language":"en-US""#
        if !extra.isEmpty { text += "," + extra }
        return text + "}"
    }
}

// MARK: - Events

/// A server event as received: its JSON and the fields tests look at.
struct WireEvent: CustomStringConvertible, Sendable {
    let text: String
    let object: JSONObject

    init(_ text: String) throws {
        self.text = text
        guard case .object(let object) = try JSONParser().parse(text) else {
            throw TestClientError.protocolError("an event that is not a JSON object: \(text)")
        }
        self.object = object
    }

    var type: String { string("type") ?? "?" }
    var seq: Int { Int(number("seq") ?? -1) }
    var description: String { text.count > 160 ? String(text.prefix(160)) + "…" : text }

    func number(_ key: String) -> Double? { if case .number(let n)? = object[key] { n } else { nil } }
    func string(_ key: String) -> String? { if case .string(let s)? = object[key] { s } else { nil } }
    func bool(_ key: String) -> Bool? { if case .bool(let b)? = object[key] { b } else { nil } }

    /// The result of a `final` or `volatile`.
    var result: TestResult? {
        guard type == "final" || type == "volatile", let start = number("start"), let end = number("end"),
              let text = string("text") else { return nil }
        var words: [TestWord] = []
        if case .array(let items)? = object["words"] {
            for case .object(let w) in items {
                guard case .string(let word)? = w["word"], case .number(let s)? = w["start"],
                      case .number(let e)? = w["end"] else { continue }
                var confidence: Double?
                if case .number(let c)? = w["confidence"] { confidence = c }
                words.append(TestWord(word: word, start: s, end: e, confidence: confidence))
            }
        }
        return TestResult(start: start, end: end, text: text, words: words)
    }

    /// The error code of an `error`.
    var errorCode: String? { type == "error" ? string("code") : nil }
}

struct TestWord: Equatable, Sendable {
    var word: String
    var start: Double
    var end: Double
    var confidence: Double?
}

/// A final or volatile result, without `seq`: what must be equal between two runs.
struct TestResult: Equatable, Sendable, CustomStringConvertible {
    var start: Double
    var end: Double
    var text: String
    var words: [TestWord]

    var description: String { "[\(start)–\(end)] \(text)" }
}

extension Array where Element == WireEvent {
    var finals: [TestResult] { filter { $0.type == "final" }.compactMap(\.result) }
    var types: [String] { map(\.type) }
    func first(_ type: String) -> WireEvent? { first { $0.type == type } }
    func index(of type: String) -> Int? { firstIndex { $0.type == type } }
    var errors: [WireEvent] { filter { $0.type == "error" } }
    /// The words of every final, in order.
    var finalWords: [String] { finals.flatMap { $0.text.split(separator: " ").map(String.init) } }
}

// MARK: - References

/// What `LocalSession` (the same machine and pipeline, run synchronously) gives for an input:
/// the events a client would receive. Cached per input name (several tests send the same audio).
enum Reference {
    private static let cache = Locked<[String: [WireEvent]]>([:])

    static func events(_ input: TestInput, finalizeAt: [(index: Int, message: String)] = []) -> [WireEvent] {
        let key = input.name + finalizeAt.map { "|\($0.index):\($0.message)" }.joined()
        if let hit = cache.withLock({ $0[key] }) { return hit }
        let session = LocalSession(engine: SharedEngine.engine)
        session.send(text: input.startMessage)
        for (i, message) in input.messages.enumerated() {
            for control in finalizeAt where control.index == i { session.send(text: control.message) }
            session.send(audio: message)
        }
        session.end()
        let events = session.events.map { try! WireEvent($0.text) }
        cache.withLock { $0[key] = events }
        return events
    }

    static func finals(_ input: TestInput) -> [TestResult] { events(input).finals }
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

/// How a client that floods the server and never reads ends: with the 4008 close frame, or,
/// when its unread flood is still in the server's socket as the server closes, with a TCP
/// reset that takes the close frame (waiting in the client's full receive buffer) with it.
/// A client that does not read cannot be promised the frame; the tests check the server's
/// decision through its `slow_consumer` count as well.
func expectSlowConsumerClose(_ client: StenoClient, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(client.isClosed, "\(what): still open", sourceLocation: sourceLocation)
    #expect(client.closeCode == 4008 || client.closeCode == nil,
            "\(what): close \(client.closeCode.map(String.init) ?? "none")", sourceLocation: sourceLocation)
}

/// Polls until `condition` holds; false if it did not within `timeout` (a guard, not a timing).
@discardableResult
func eventually(timeout: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Deadline(timeout)
    while try !condition() {
        if deadline.hasPassed { return false }
        usleep(10_000)
    }
    return true
}

// MARK: - Client

/// A `/v1/stream` or `/v1/listen` client speaking the protocol over `WebSocketTestClient`.
///
/// One thread: sending audio interleaves reading whatever events have arrived, so a client
/// that streams faster than the server analyzes is held back by TCP (its writes time out and
/// are retried, counted in `blockedWrites`) while it keeps reading.
final class StenoClient {
    let ws: WebSocketTestClient
    /// Every event received, in order.
    private(set) var events: [WireEvent] = []
    /// The close frame's code once it arrived (nil: none yet, or the connection just ended).
    private(set) var closeCode: UInt16?
    private(set) var closeReason = ""
    /// A close frame arrived, or the connection ended.
    private(set) var isClosed = false
    /// Writes that could not finish within `writeSlice` (TCP backpressure).
    private(set) var blockedWrites = 0
    /// Seconds of audio sent so far (from `send(audio:)`).
    private(set) var audioSent = 0.0
    /// Time a blocked write waits before reading events in between.
    var writeSlice = 0.05
    /// Called after each audio message with the seconds of audio sent so far.
    var onAudioSent: ((Double) -> Void)?

    init(port: Int, path: String = "/v1/stream", headers: [(String, String)] = [], tls: Bool = false,
         receiveBufferSize: Int? = nil, sendBufferSize: Int? = nil) throws {
        ws = try WebSocketTestClient.connect(port: port, path: path, headers: headers, tls: tls,
                                             receiveBufferSize: receiveBufferSize, sendBufferSize: sendBufferSize,
                                             timeout: 30)
    }

    func send(_ json: String) throws {
        try write { try ws.sendText(json, timeout: writeSlice) }
    }

    /// Sends `start` and waits for `ready`.
    @discardableResult
    func start(_ input: TestInput, extra: String = "", timeout: Double = 60) throws -> WireEvent {
        try send(StartMessage.text(input.format, extra: extra))
        return try waitFor("ready", timeout: timeout)
    }

    /// Sends audio messages. `speed` paces them (1 = real time); nil sends as fast as TCP
    /// takes them. Events that arrive meanwhile are read.
    func send(audio messages: [[UInt8]], of input: TestInput, speed: Double? = nil) throws {
        let began = ContinuousClock.now
        var t = 0.0
        for message in messages {
            // A session the server closed takes no more audio.
            if isClosed { return }
            if let speed {
                let due = began + .milliseconds(Int(t / speed * 1000))
                while ContinuousClock.now < due {
                    try readAvailable()
                    usleep(5_000)
                }
            }
            try write { try ws.sendBinary(message, timeout: writeSlice) }
            t += input.messageDuration(message)
            audioSent += input.messageDuration(message)
            onAudioSent?(audioSent)
            try readAvailable()
        }
    }

    /// Runs a write; while it is held back, reads events and retries (up to `limit` seconds).
    private func write(limit: Double = 300, _ body: () throws -> Void) throws {
        do {
            try body()
            return
        } catch TestClientError.timeout {
            blockedWrites += 1
        }
        let deadline = Deadline(limit)
        while ws.hasUnsentBytes {
            if deadline.hasPassed { throw TestClientError.timeout("a write held back for \(limit) s") }
            try readAvailable()
            if isClosed { throw TestClientError.closed("while writing") }
            do { try ws.flush(timeout: writeSlice) } catch TestClientError.timeout {}
        }
    }

    /// Reads the events that have arrived, without waiting for more.
    func readAvailable() throws {
        while !isClosed && hasData {
            try receiveOne(timeout: 30)
        }
    }

    private var hasData: Bool {
        if ws.stream.buffered > 0 { return true }
        var p = pollfd(fd: ws.stream.readFD, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) > 0
    }

    /// Reads one message; false when the connection is over.
    @discardableResult
    private func receiveOne(timeout: Double) throws -> Bool {
        guard !isClosed else { return false }
        let message: WebSocketTestClient.Message
        do {
            message = try ws.receive(timeout: timeout)
        } catch TestClientError.closed {
            isClosed = true
            return false
        }
        switch message {
        case .text(let text):
            events.append(try WireEvent(text))
        case .close(let code, let reason):
            closeCode = code
            closeReason = reason
            isClosed = true
            return false
        case .binary(let bytes):
            throw TestClientError.protocolError("the server sent a binary message of \(bytes.count) bytes")
        case .pong:
            break
        }
        return true
    }

    /// The next event (nil when the session closed first).
    func next(timeout: Double = 60) throws -> WireEvent? {
        let count = events.count
        let deadline = Deadline(timeout)
        while events.count == count {
            guard try receiveOne(timeout: max(0.01, Double(deadline.remainingMilliseconds) / 1000)) else { return nil }
        }
        return events[count]
    }

    /// Reads until an event of `type` arrives (after the ones already read) and returns it.
    func waitFor(_ type: String, timeout: Double = 120) throws -> WireEvent {
        let deadline = Deadline(timeout)
        while true {
            guard let event = try next(timeout: max(0.01, Double(deadline.remainingMilliseconds) / 1000)) else {
                throw TestClientError.closed("waiting for \"\(type)\"; got \(events.types) and close \(closeCode.map(String.init) ?? "none")")
            }
            if event.type == type { return event }
        }
    }

    /// Reads until the close frame (or the end of the connection); waits for the TCP end.
    func readUntilClose(timeout: Double = 180) throws {
        let deadline = Deadline(timeout)
        while try receiveOne(timeout: max(0.01, Double(deadline.remainingMilliseconds) / 1000)) {}
        try? ws.awaitDisconnect(timeout: 10)
    }

    /// Sends `end` and reads everything up to the close.
    func end(timeout: Double = 180) throws {
        try send(#"{"type":"end"}"#)
        try readUntilClose(timeout: timeout)
    }

    /// A whole session: start, all the audio as fast as TCP takes it, end, read to the close.
    static func transcribe(_ input: TestInput, on server: LiveServer, extra: String = "", speed: Double? = nil) throws -> StenoClient {
        let client = try server.connect()
        try client.start(input, extra: extra)
        try client.send(audio: input.messages, of: input, speed: speed)
        try client.end()
        return client
    }

    func disconnect() { ws.disconnect() }
}

// MARK: - Checks

/// What every session must satisfy (docs/protocol.md): `ready` first; `seq` 1, 2, 3 … with no gaps;
/// finals in increasing, non-overlapping ranges with their words inside; every time inside the
/// audio; a (non-empty) volatile followed by another volatile or a final.
func expectWellFormed(_ events: [WireEvent], audio duration: Double, _ what: String = "",
                      sourceLocation: SourceLocation = #_sourceLocation) {
    let slack = 0.0015
    // `ready` first (only errors about messages before `start` may precede it).
    let firstOther = events.first { $0.type != "error" }
    #expect(firstOther?.type == "ready", "\(what): first event \(firstOther?.description ?? "none")", sourceLocation: sourceLocation)
    let seqs = events.map(\.seq)
    #expect(seqs == Array(1...max(1, events.count)).prefix(events.count).map { $0 },
            "\(what): seq \(seqs)", sourceLocation: sourceLocation)
    func inside(_ t: Double) -> Bool { t >= 0 && t <= duration + slack }
    var lastFinalEnd = 0.0
    var pendingVolatile: WireEvent?
    for event in events {
        switch event.type {
        case "final", "volatile":
            guard let r = event.result else {
                Issue.record("\(what): malformed result \(event)", sourceLocation: sourceLocation)
                continue
            }
            #expect(r.start <= r.end && inside(r.start) && inside(r.end), "\(what): times of \(event)", sourceLocation: sourceLocation)
            for w in r.words {
                #expect(w.start <= w.end && w.start >= r.start - slack && w.end <= r.end + slack,
                        "\(what): word \(w.word) [\(w.start)–\(w.end)] outside \(r)", sourceLocation: sourceLocation)
            }
            if event.type == "final" {
                #expect(r.start >= lastFinalEnd - slack, "\(what): final \(r) overlaps the previous one ending at \(lastFinalEnd)",
                        sourceLocation: sourceLocation)
                #expect(!r.text.isEmpty, "\(what): empty final", sourceLocation: sourceLocation)
                lastFinalEnd = r.end
                pendingVolatile = nil
            } else {
                pendingVolatile = r.text.isEmpty ? nil : event
            }
        case "speech":
            #expect(inside(event.number("at") ?? -1), "\(what): \(event)", sourceLocation: sourceLocation)
        case "progress":
            let received = event.number("received") ?? -1, analyzed = event.number("analyzed") ?? -1
            #expect(analyzed >= 0 && analyzed <= received + slack && inside(received), "\(what): \(event)",
                    sourceLocation: sourceLocation)
        default:
            break
        }
    }
    if let pendingVolatile, events.last?.type != "cancelled" {
        Issue.record("\(what): volatile \(pendingVolatile) is followed by neither a volatile nor a final",
                     sourceLocation: sourceLocation)
    }
}

/// What a client saw, to hand from a client's thread to the test's (expectations must be
/// checked on the test's own thread to count).
struct SessionRecord: Sendable {
    var events: [WireEvent]
    var closeCode: UInt16?
    var closeReason: String
    var blockedWrites: Int
}

extension StenoClient {
    var record: SessionRecord {
        SessionRecord(events: events, closeCode: closeCode, closeReason: closeReason, blockedWrites: blockedWrites)
    }
}

func expectEndedNormally(_ client: StenoClient, audio duration: Double, _ what: String = "", allowErrors: Bool = false,
                         sourceLocation: SourceLocation = #_sourceLocation) {
    expectEndedNormally(client.record, audio: duration, what, allowErrors: allowErrors, sourceLocation: sourceLocation)
}

func expectFatal(_ client: StenoClient, _ code: String, close: UInt16, _ what: String = "",
                 sourceLocation: SourceLocation = #_sourceLocation) {
    expectFatal(client.record, code, close: close, what, sourceLocation: sourceLocation)
}

/// A session that ended normally: well formed, `ended` last with the duration, close 1000.
func expectEndedNormally(_ client: SessionRecord, audio duration: Double, _ what: String = "", allowErrors: Bool = false,
                         sourceLocation: SourceLocation = #_sourceLocation) {
    expectWellFormed(client.events, audio: duration, what, sourceLocation: sourceLocation)
    #expect(client.events.last?.type == "ended", "\(what): last event \(client.events.last?.description ?? "none")",
            sourceLocation: sourceLocation)
    if let ended = client.events.last, ended.type == "ended" {
        #expect(abs((ended.number("duration") ?? -1) - duration) < 0.0015, "\(what): \(ended) for \(duration) s",
                sourceLocation: sourceLocation)
    }
    #expect(client.closeCode == 1000, "\(what): close \(client.closeCode.map(String.init) ?? "none") \(client.closeReason)",
            sourceLocation: sourceLocation)
    #expect(allowErrors || client.events.errors.isEmpty, "\(what): errors \(client.events.errors)", sourceLocation: sourceLocation)
}

/// A session that ended with a fatal error: it is the last event, then the close with its code.
func expectFatal(_ client: SessionRecord, _ code: String, close: UInt16, _ what: String = "",
                 sourceLocation: SourceLocation = #_sourceLocation) {
    let last = client.events.last
    #expect(last?.type == "error" && last?.errorCode == code && last?.bool("fatal") == true,
            "\(what): last event \(last?.description ?? "none"), expected a fatal \(code)", sourceLocation: sourceLocation)
    #expect(client.closeCode == close, "\(what): close \(client.closeCode.map(String.init) ?? "none") \(client.closeReason), expected \(close)",
            sourceLocation: sourceLocation)
    let seqs = client.events.map(\.seq)
    #expect(seqs == Array(0..<seqs.count).map { $0 + 1 }, "\(what): seq \(seqs)", sourceLocation: sourceLocation)
}

/// The words two transcripts share, as a fraction of the longer one's (order-aware: the
/// longest common subsequence).
func wordOverlap(_ a: [String], _ b: [String]) -> Double {
    guard !a.isEmpty || !b.isEmpty else { return 1 }
    var row = [Int](repeating: 0, count: b.count + 1)
    for x in a {
        var previousDiagonal = 0
        for (j, y) in b.enumerated() {
            let above = row[j + 1]
            row[j + 1] = x == y ? previousDiagonal + 1 : max(row[j + 1], row[j])
            previousDiagonal = above
        }
    }
    return Double(row[b.count]) / Double(max(a.count, b.count))
}

// MARK: - Threads

/// Numbers shared between threads.
final class SharedCounters: Sendable {
    private let values: Locked<[Int]>
    init(count: Int) { values = Locked([Int](repeating: 0, count: count)) }
    subscript(i: Int) -> Int {
        get { values.withLock { $0[i] } }
    }
    func set(_ i: Int, _ value: Int) { values.withLock { $0[i] = value } }
    var all: [Int] { values.withLock { $0 } }
}

/// A body running on a thread of its own.
final class BackgroundJob<T: Sendable>: Sendable {
    private let result = Locked<T?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () -> T) {
        let thread = Thread { [self] in
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        thread.start()
    }

    /// Waits for the result (nil if it did not come within `timeout`).
    func wait(timeout: Double = 120) -> T? {
        guard done.wait(timeout: .now() + timeout) == .success else { return nil }
        done.signal()
        return result.withLock { $0 }
    }
}

/// Runs each body on its own thread (blocking socket work must not occupy Swift
/// concurrency's few threads) and returns their results in order.
func onThreads<T: Sendable>(_ bodies: [@Sendable () throws -> T]) -> [Result<T, any Error>] {
    let results = Locked<[Int: Result<T, any Error>]>([:])
    let done = DispatchSemaphore(value: 0)
    for (i, body) in bodies.enumerated() {
        let thread = Thread {
            let r = Result { try body() }
            results.withLock { $0[i] = r }
            done.signal()
        }
        thread.stackSize = 4 << 20
        thread.start()
    }
    for _ in bodies { done.wait() }
    return results.withLock { r in bodies.indices.map { r[$0]! } }
}
