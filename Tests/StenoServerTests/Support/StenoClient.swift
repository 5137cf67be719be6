import Foundation
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

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

    /// One binary frame, as it is.
    func sendBinary(_ bytes: [UInt8]) throws {
        try write { try ws.sendBinary(bytes, timeout: writeSlice) }
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
