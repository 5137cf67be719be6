// steno-bench latency's first part (LatencyBench.swift has the command, the audio and the
// second, in-process part): real `steno serve` binaries fed the speech in real time, each
// final's latency cut into its parts by the server's debug line for it.

import Foundation
import StenoAudio
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// MARK: - The server

/// One server's debug line for a job (see StreamSession.logLatency).
private struct LatencyLine {
    var session = ""
    var job = ""
    var fields: [String: Double] = [:]

    init?(_ line: Substring) {
        guard let range = line.range(of: "latency session=") else { return nil }
        for pair in line[range.lowerBound...].split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            switch parts[0] {
            case "session": session = String(parts[1])
            case "job": job = String(parts[1])
            default: if let value = Double(parts[1]) { fields[String(parts[0])] = value }
            }
        }
    }

    subscript(_ name: String) -> Double? { fields[name] }
}

/// What a client saw of one session.
private struct ClientSession {
    var id = ""
    /// Monotonic time each 20 ms message was sent.
    var sentAt: [Double] = []
    var finals: [(start: Double, end: Double, text: String, receivedAt: Double)] = []
    var endSentAt: Double?
    var endedAt: Double?

    /// When the audio at `time` (session seconds) was sent.
    func sent(at time: Double) -> Double? {
        sentAt.isEmpty ? nil : sentAt[min(sentAt.count - 1, max(0, Int(time / 0.02)))]
    }
}

private let finalParts = ["silence", "block", "batch", "lane", "analysis", "search", "words", "machine", "out", "(CPU)"]
private let endParts = ["in", "lane", "analysis", "search", "words", "machine", "out", "(CPU)"]

private struct Breakdown {
    var finals: [String: [Double]] = [:]
    var finalTotals: [Double] = []
    var otherFinals: [Double] = []
    var ends: [String: [Double]] = [:]
    var endTotals: [Double] = []
    var unmatched = 0
    var errors: [(set: String, errors: Int, words: Int)] = []

    mutating func add(_ client: ClientSession, _ lines: [LatencyLine]) {
        let mine = lines.filter { $0.session == client.id }
        for final in client.finals {
            guard let sentEnd = client.sent(at: final.end) else { continue }
            let total = final.receivedAt - sentEnd
            guard let line = mine.first(where: { ($0["final_end"] ?? -1) >= final.end - 0.0015 && ($0["final_end"] ?? 99) <= final.end + 0.0015 }) else {
                unmatched += 1
                otherFinals.append(total)
                continue
            }
            guard line.job == "batch", let decided = line["decided"], let closed = line["closed"],
                  let submitted = line["submitted"], let started = line["started"], let close = line["close"],
                  let search = line["search"], let words = line["words"], let queued = line["queued"],
                  let sentBlock = client.sent(at: max(0, closed - 0.0001)) else {
                otherFinals.append(total)
                continue
            }
            let parts: [String: Double] = [
                "silence": decided - final.end, "block": closed - decided, "batch": submitted - sentBlock,
                "lane": started - submitted, "analysis": close - started, "search": search, "words": words,
                "machine": queued - close - search - words - (line["alternatives"] ?? 0), "out": final.receivedAt - queued,
                "(CPU)": line["cpu"] ?? .nan,
            ]
            for (name, value) in parts { finals[name, default: []].append(value) }
            finalTotals.append(total)
        }
        if let endSent = client.endSentAt, let ended = client.endedAt, !mine.contains(where: { $0.job == "end" }) {
            endTotals.append(ended - endSent)  // a server without the debug lines: the total only
        }
        if let endSent = client.endSentAt, let ended = client.endedAt,
           let line = mine.first(where: { $0.job == "end" }), let submitted = line["submitted"],
           let started = line["started"], let queued = line["queued"] {
            let close = line["close"] ?? queued
            let search = line["search"] ?? 0
            let words = line["words"] ?? 0
            let parts: [String: Double] = [
                "in": submitted - endSent, "lane": started - submitted, "analysis": close - started,
                "search": search, "words": words, "machine": queued - close - search - words, "out": ended - queued,
                "(CPU)": line["cpu"] ?? 0,
            ]
            for (name, value) in parts { ends[name, default: []].append(value) }
            endTotals.append(ended - endSent)
        }
    }
}

func runServerLatency(stenos: [String], engine: String, serveArguments: [String], repeats: Int, stream: LatencyStream, endFiles: [LatencySet.File]) {
    var results = [Breakdown](repeating: Breakdown(), count: stenos.count)
    for round in 0..<repeats {
        for (which, steno) in stenos.enumerated() {
            print("  round \(round + 1), \(steno): load \(loadAverage())")
            guard let measured = measureServerLatency(steno: steno, engine: engine, serveArguments: serveArguments, stream: stream, endFiles: endFiles) else {
                print("  \(steno): failed")
                continue
            }
            for (client, lines) in measured.sessions { results[which].add(client, lines) }
            if results[which].errors.isEmpty { results[which].errors = measured.errors }
        }
    }
    print("")
    print("  finals the detector ended, seconds (p50 / p95); total = sending the audio at the final's end → reading the final")
    let header = ["binary", "n", "total"] + finalParts + ["other"]
    var rows: [[String]] = []
    for (which, steno) in stenos.enumerated() {
        let r = results[which]
        var row = [(steno as NSString).lastPathComponent, "\(r.finalTotals.count)", medianAndP95(r.finalTotals)]
        row += finalParts.map { medianAndP95(r.finals[$0] ?? []) }
        row.append(r.otherFinals.isEmpty ? "-" : "\(r.otherFinals.count): " + medianAndP95(r.otherFinals))
        rows.append(row)
    }
    printTable(header, rows)
    print("  other: finals not ended by the detector (by `end`) or with no debug line, their total; unmatched finals: "
        + results.map { "\($0.unmatched)" }.joined(separator: ", ")
        + (engine == "pocketsphinx" ? "" : " (\(engine)'s finals come from its worker, with no debug line: all are other)"))
    print("")
    print("  end → ended, seconds (p50 / p95)")
    rows = []
    for (which, steno) in stenos.enumerated() {
        let r = results[which]
        rows.append([(steno as NSString).lastPathComponent, "\(r.endTotals.count)", medianAndP95(r.endTotals)] + endParts.map { medianAndP95(r.ends[$0] ?? []) })
    }
    printTable(["binary", "n", "total"] + endParts, rows)
    print("")
    print("  word errors of the server's finals (the long session), per set")
    rows = []
    for (which, steno) in stenos.enumerated() {
        rows.append([(steno as NSString).lastPathComponent] + results[which].errors.map {
            "\($0.set) \($0.errors)/\($0.words) = \(format(100 * Double($0.errors) / Double(max(1, $0.words)), 1)) %"
        })
    }
    printTable(["binary"] + (results.first?.errors.map { _ in "" } ?? []), rows)
}

private func measureServerLatency(steno: String, engine: String, serveArguments: [String], stream: LatencyStream, endFiles: [LatencySet.File])
    -> (sessions: [(ClientSession, [LatencyLine])], errors: [(set: String, errors: Int, words: Int)])? {
    let logPath = NSTemporaryDirectory() + "steno-bench-latency-\(getpid()).log"
    unlink(logPath)
    defer { unlink(logPath) }
    // pocketsphinx: two decoders, made before the measured sessions (a warm-up session waits
    // for them); Whisper: its worker has loaded the model when the port is printed.
    let decoders = engine == "pocketsphinx" ? ["--recognizers", "2"] : []
    guard let server = Child.spawn(steno, ["serve", "--engine", engine, "--port", "0", "--idle-timeout", "0"] + decoders
                                       + ["--log-level", "debug", "--web-root", "/nonexistent"] + serveArguments,
                                   stdout: true, stderrPath: logPath),
          let port = server.readPort() else { return nil }
    defer { server.terminate() }
    _ = latencySession(port: port, samples: Array(stream.samples.prefix(32000)), realTime: false)
    usleep(1_500_000)

    var clients: [ClientSession] = []
    guard let long = latencySession(port: port, samples: stream.samples, realTime: true) else { return nil }
    clients.append(long)
    for file in endFiles {
        if let short = latencySession(port: port, samples: file.samples, realTime: true) { clients.append(short) }
    }
    usleep(200_000)
    let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    let lines = text.split(separator: "\n").compactMap(LatencyLine.init)
    if ProcessInfo.processInfo.environment["STENO_ENDPOINT_TRACE"] != nil {
        for final in long.finals { print("server final start=\(final.start) end=\(final.end) text=\(final.text)") }
    }
    let errors = stream.errors(long.finals.map { ($0.start, $0.end, $0.text) })
    return (clients.map { ($0, lines) }, errors)
}

/// One session: `start` (16 kHz PCM), the samples in 20 ms messages (in real time, or as fast
/// as the server takes them), `end` right after the last one; what the client saw.
private func latencySession(port: Int, samples: [Int16], realTime: Bool) -> ClientSession? {
    do {
        // Admission may refuse a new session for a moment after a busy one (503): try again.
        var attempt = 0
        var connected: WebSocketTestClient?
        while connected == nil {
            do { connected = try WebSocketTestClient.connect(port: port, timeout: 30) } catch {
                attempt += 1
                guard "\(error)".contains("503"), attempt < 60 else { throw error }
                usleep(500_000)
            }
        }
        guard let ws = connected else { return nil }
        try ws.sendText(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#)
        var session = ClientSession()
        func handle(_ message: WebSocketTestClient.Message) throws {
            let now = monotonicSeconds()
            guard case .text(let text) = message, case .object(let event) = try JSONParser().parse(text),
                  case .string(let type)? = event["type"] else { return }
            switch type {
            case "ready":
                if case .string(let id)? = event["session"] { session.id = id }
            case "final":
                if case .number(let start)? = event["start"], case .number(let end)? = event["end"],
                   case .string(let words)? = event["text"] {
                    session.finals.append((start, end, words, now))
                }
            case "ended": session.endedAt = now
            default: break
            }
        }
        func readAvailable(until deadline: Double) throws {
            while session.endedAt == nil {
                let wait = max(0, deadline - monotonicSeconds())
                var p = pollfd(fd: ws.stream.readFD, events: Int16(POLLIN), revents: 0)
                guard ws.stream.buffered > 0 || poll(&p, 1, Int32(wait * 1000)) > 0 else { return }
                try handle(ws.receive(timeout: 30))
            }
        }
        let step = 320
        let began = monotonicSeconds()
        var offset = 0
        while offset < samples.count {
            let end = min(samples.count, offset + step)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(2 * (end - offset))
            for sample in samples[offset..<end] {
                let bits = UInt16(bitPattern: sample)
                bytes.append(UInt8(bits & 0xff))
                bytes.append(UInt8(bits >> 8))
            }
            session.sentAt.append(monotonicSeconds())
            try ws.sendBinary(bytes, timeout: 60)
            offset = end
            try readAvailable(until: realTime ? began + Double(session.sentAt.count) * 0.02 : 0)
        }
        session.endSentAt = monotonicSeconds()
        try ws.sendText(#"{"type":"end"}"#)
        while session.endedAt == nil { try handle(ws.receive(timeout: 120)) }
        _ = try? ws.close()
        return session
    } catch {
        print("  session failed: \(error)")
        return nil
    }
}
