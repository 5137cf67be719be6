import Foundation
import StenoCore
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// What the benchmarks that talk to a `steno serve` child share: one live session streamed
// over a WebSocket (`server`, `viewers`, `capacity`), several talkers at once (`connections
// --wakeups` and `--threads`), and waiting for the server's shared decoders to be made before
// anything is measured.

/// When things happened in one session streamed by ``streamSession(_:start:frames:realTime:handle:)``,
/// on the monotonic clock.
struct StreamedSession {
    /// When `start` was written: frame `k` is due at `startedAt + 0.02 (k + 1)` in real time.
    var startedAt = 0.0
    /// When each frame was written (after any wait for the socket).
    var sendTimes: [Double] = []
    var endSentAt = 0.0
    var endedAt = 0.0
}

/// Streams `frames` (20 ms of audio each) on an open session connection: `start`, the frames
/// in real time (or as fast as the server reads), `end`, then reads until `ended`. Every
/// event goes to `handle` with its type, its members, its text as it came, and the monotonic
/// time it was read. Throws if the server closes before `ended`.
func streamSession(_ ws: WebSocketTestClient, start: String, frames: [[UInt8]], realTime: Bool,
                   handle: (_ type: String, _ event: JSONObject, _ text: String, _ at: Double) -> Void) throws -> StreamedSession {
    var record = StreamedSession()
    record.sendTimes.reserveCapacity(frames.count)
    var ended = false
    func receiveOne(timeout: Double) throws {
        let message = try ws.receive(timeout: timeout)
        let now = monotonicSeconds()
        switch message {
        case .text(let text):
            guard case .object(let event) = try JSONParser().parse(text), case .string(let type)? = event["type"] else { return }
            if type == "ended" {
                ended = true
                record.endedAt = now
            }
            handle(type, event, text, now)
        case .close(let code, let reason):
            if !ended { throw TalkerError("closed (\(code.map(String.init) ?? "no code") \(reason)) before ended") }
        default:
            break
        }
    }
    func readAvailable(until deadline: Double) throws {
        while !ended {
            let wait = max(0, deadline - monotonicSeconds())
            var p = pollfd(fd: ws.stream.readFD, events: Int16(POLLIN), revents: 0)
            guard ws.stream.buffered > 0 || poll(&p, 1, Int32((wait * 1000).rounded(.up))) > 0 else { return }
            try receiveOne(timeout: 30)
        }
    }
    try ws.sendText(start)
    record.startedAt = monotonicSeconds()
    for (index, frame) in frames.enumerated() {
        try ws.sendBinary(frame, timeout: 120)
        record.sendTimes.append(monotonicSeconds())
        try readAvailable(until: realTime ? record.startedAt + Double(index + 1) * 0.02 : 0)
    }
    record.endSentAt = monotonicSeconds()
    try ws.sendText(#"{"type":"end"}"#)
    while !ended { try receiveOne(timeout: 120) }
    _ = try? ws.close()
    return record
}

/// `count` talkers at once, each on a thread of its own speaking `pcm` (``runTalker(port:pcm:)``);
/// returns once all have ended, with their results in the order they ended.
func runTalkers(_ count: Int, port: Int, pcm: [UInt8]) -> [TalkerResult] {
    let results = Locked<[TalkerResult]>([])
    let threads = (0..<count).map { _ in
        Thread {
            let result = runTalker(port: port, pcm: pcm)
            results.withLock { $0.append(result) }
        }
    }
    threads.forEach { $0.start() }
    while results.withLock({ $0.count }) < count { usleep(20_000) }
    return results.withLock { $0 }
}

/// 16 kHz s16le PCM cut into 20 ms messages.
func pcmFrames(_ pcm: [UInt8]) -> [[UInt8]] {
    stride(from: 0, to: pcm.count, by: 640).map { Array(pcm[$0..<min(pcm.count, $0 + 640)]) }
}

struct TalkerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The server's /metrics as name (with labels) → value.
func scrapeMetrics(port: Int) -> [String: Double]? {
    guard let response = try? HTTPTestClient.request(port: port, path: "/metrics", timeout: 30),
          response.status == 200 else { return nil }
    var values: [String: Double] = [:]
    for line in response.bodyText.split(separator: "\n") where !line.hasPrefix("#") {
        guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
        values[String(line[..<space])] = value
    }
    return values
}

/// Waits until the server is ready and has made all its shared decoders (`steno_recognizers_made` reaches
/// `steno_recognizers`): it makes them in the background after it starts listening, ≈0.5 s of CPU each, which a measured round must not
/// share its cores with. How long it took, or nil if they were not all made within `timeout`
/// seconds. `spares`: the server was started with `--spare-recognizers` that many instead;
/// they are waited for.
@discardableResult
func waitForRecognizers(port: Int, spares: Int? = nil, timeout: Double = 120) -> Double? {
    let begin = monotonicSeconds()
    while monotonicSeconds() - begin < timeout {
        // And ready: a Whisper worker has loaded its model.
        if let m = scrapeMetrics(port: port), let all = m["steno_recognizers"], let made = m["steno_recognizers_made"],
           made >= min(all, spares.map(Double.init) ?? all),
           (try? HTTPTestClient.request(port: port, path: "/readyz", timeout: 30))?.status == 200 {
            return monotonicSeconds() - begin
        }
        usleep(100_000)
    }
    print("  the server's recognizers were not all made within \(Int(timeout)) s")
    return nil
}
