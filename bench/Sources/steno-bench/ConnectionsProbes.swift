// steno-bench connections: readiness probed during a round, and the talkers among the silent sessions (ConnectionsBench.swift).
import CEpoll
import Foundation
import StenoAudio
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif
// MARK: - Readiness

/// `/readyz` asked again and again on a thread of its own (the client's thread goes on).
final class BackgroundProber {
    private let running = Locked(true)
    private let probes: Locked<ReadinessProbes>
    private let thread: Thread

    init(port: Int, every seconds: Double) {
        let probes = Locked(ReadinessProbes(port: port))
        let running = self.running
        self.probes = probes
        thread = Thread {
            while running.withLock({ $0 }) {
                var p = probes.withLock { $0 }
                p.ask("/readyz")
                probes.withLock { $0 = p }
                usleep(useconds_t(seconds * 1_000_000))
            }
        }
        thread.start()
    }

    /// Stops asking (after the question under way) and returns what was answered.
    func stop() -> ReadinessProbes {
        running.withLock { $0 = false }
        while !thread.isFinished { usleep(10_000) }
        return probes.withLock { $0 }
    }
}

/// GETs of `/readyz`: the statuses seen (with the `status` field of the JSON body), the slowest.
struct ReadinessProbes: Sendable {
    let port: Int
    var seen: [String] = []
    var slowestMs = 0.0
    var last: String { seen.last ?? "-" }

    init(port: Int) { self.port = port }

    @discardableResult
    mutating func ask(_ path: String) -> Int {
        let began = monotonicSeconds()
        guard let response = try? HTTPTestClient.request(port: port, path: path, timeout: 30) else {
            seen.append("none")
            return 0
        }
        slowestMs = max(slowestMs, (monotonicSeconds() - began) * 1000)
        var answer = "\(response.status)"
        if response.status != 200, case .object(let body)? = try? JSONParser().parse(response.bodyText),
           case .string(let status)? = body["status"] {
            answer += " " + status
        }
        seen.append(answer)
        return response.status
    }

    /// What the probes said, each different answer once, in order ("200", "200, 503 busy").
    var summary: String {
        var distinct: [String] = []
        for answer in seen where distinct.last != answer { distinct.append(answer) }
        return distinct.isEmpty ? "-" : distinct.joined(separator: ", ")
    }

    /// The `sessions` count of `/healthz`.
    func healthzSessions() -> Int {
        guard let response = try? HTTPTestClient.request(port: port, path: "/healthz", timeout: 30),
              case .object(let body)? = try? JSONParser().parse(response.bodyText),
              case .number(let sessions)? = body["sessions"] else { return -1 }
        return Int(sessions)
    }
}

// MARK: - Talkers

struct TalkerResult: Sendable {
    var lags: [Double] = []
    /// From sending the audio at a final's end to receiving the final.
    var finalLatencies: [Double] = []
    var finalsAtEnd = 0
    var endLatency = 0.0
    var failure: String?
}

extension TalkerStats {
    init(_ results: [TalkerResult], cpuSeconds: Double, audioSeconds: Double) {
        func percentile(_ sorted: [Double], _ p: Double) -> Double {
            sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
        let lags = results.flatMap(\.lags).sorted()
        let finals = results.flatMap(\.finalLatencies).sorted()
        self.init()
        lagP95 = percentile(lags, 0.95)
        lagMax = lags.last ?? 0
        finalP50 = percentile(finals, 0.5)
        finalP95 = percentile(finals, 0.95)
        finalMax = finals.last ?? 0
        self.finals = finals.count + results.map(\.finalsAtEnd).reduce(0, +)
        let ok = results.filter { $0.failure == nil }
        endLatency = ok.isEmpty ? 0 : ok.map(\.endLatency).reduce(0, +) / Double(ok.count)
        cpuPerAudioSecondMs = audioSeconds > 0 ? max(0, cpuSeconds) / audioSeconds * 1000 : 0
    }
}

/// One session speaking `pcm` (16 kHz s16le) in real time, 20 ms a message, then `end`.
func runTalker(port: Int, pcm: [UInt8]) -> TalkerResult {
    var result = TalkerResult()
    do {
        let ws = try WebSocketTestClient.connect(port: port, timeout: 30)
        try ws.sendText(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#)
        let step = 640  // 20 ms
        var sentAt: [Double] = []
        sentAt.reserveCapacity(pcm.count / step + 1)
        var ended = false
        var endSentAt = 0.0
        func handle(_ message: WebSocketTestClient.Message) throws {
            guard case .text(let text) = message, case .object(let event) = try JSONParser().parse(text),
                  case .string(let type)? = event["type"] else { return }
            switch type {
            case "progress":
                if case .number(let received)? = event["received"], case .number(let analyzed)? = event["analyzed"] {
                    result.lags.append(received - analyzed)
                }
            case "final":
                if endSentAt > 0 {
                    result.finalsAtEnd += 1
                } else if case .number(let end)? = event["end"], !sentAt.isEmpty {
                    // The message holding the audio at `end` (message i holds [0.02 i, 0.02 (i+1))).
                    let i = min(sentAt.count - 1, max(0, Int(end / 0.02)))
                    result.finalLatencies.append(monotonicSeconds() - sentAt[i])
                }
            case "ended":
                result.endLatency = monotonicSeconds() - endSentAt
                ended = true
            default: break
            }
        }
        func readAvailable(waitingUntil deadline: Double) throws {
            while true {
                let wait = max(0, deadline - monotonicSeconds())
                var p = pollfd(fd: ws.stream.readFD, events: Int16(POLLIN), revents: 0)
                guard ws.stream.buffered > 0 || poll(&p, 1, Int32(wait * 1000)) > 0 else { return }
                try handle(ws.receive(timeout: 30))
                if ended { return }
            }
        }
        let start = monotonicSeconds()
        var offset = 0, index = 0
        while offset < pcm.count {
            let end = min(pcm.count, offset + step)
            sentAt.append(monotonicSeconds())
            try ws.sendBinary(Array(pcm[offset..<end]), timeout: 60)
            offset = end
            index += 1
            try readAvailable(waitingUntil: start + Double(index) * 0.02)
        }
        endSentAt = monotonicSeconds()
        try ws.sendText(#"{"type":"end"}"#)
        while !ended { try handle(ws.receive(timeout: 120)) }
        _ = try? ws.close()
    } catch {
        result.failure = "\(error)"
    }
    return result
}
