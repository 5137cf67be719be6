import Foundation
import StenoAudio
import StenoCore
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Per thread (`--threads`)

// steno-bench connections --threads 4,8 [--seconds 20] [--rounds 1] [--steno …] [--baseline OTHER/steno]:
// where a `steno serve`'s CPU goes, thread by thread, when nobody speaks and when a few do (issue
// 15: the server's CPU per audio second against the engine's at few talkers). For each N, one
// server (`--recognizers 2`, so that making decoders is over before anything is measured), and
// in turn:
//
// - idle: no session;
// - N sessions sending faint noise as 20 ms PCM messages in real time (a client without silence
//   suppression, as the capacity bench's pauses);
// - the same as 20 ms Opus packets;
// - N talkers: the LibriVox sentences in real time, 20 ms PCM messages, to `ended`.
//
// Each thread's CPU from /proc/PID/task/TID/schedstat (nanoseconds on the CPU, finer than the
// stat ticks) and its context switches from /proc/PID/task/TID/status (voluntary: it waited,
// i.e. it was woken once more), per wall second, by thread name (`steno-lws`, `steno-worker-K`,
// `steno-prepare-K`; the rest under the process's name). Context switches are what load does
// not distort much; CPU times are inflated by a busy machine, so read them side by side.

private struct ThreadCounters {
    var name = ""
    var cpu = 0.0
    var voluntary = 0
    var involuntary = 0
}

/// Every thread of `pid`, by thread id.
private func threadCounters(_ pid: pid_t) -> [Int: ThreadCounters] {
    var all: [Int: ThreadCounters] = [:]
    for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
        guard let tid = Int(task) else { continue }
        let dir = "/proc/\(pid)/task/\(task)"
        var c = ThreadCounters()
        c.name = ((try? String(contentsOfFile: "\(dir)/comm", encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
        if let sched = try? String(contentsOfFile: "\(dir)/schedstat", encoding: .utf8),
           let ns = Double(sched.split(separator: " ").first ?? "") {
            c.cpu = ns / 1e9
        }
        for line in ((try? String(contentsOfFile: "\(dir)/status", encoding: .utf8)) ?? "").split(separator: "\n") {
            let value = Int(line.split(separator: "\t").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "") ?? 0
            if line.hasPrefix("voluntary_ctxt_switches:") { c.voluntary = value }
            if line.hasPrefix("nonvoluntary_ctxt_switches:") { c.involuntary = value }
        }
        all[tid] = c
    }
    return all
}

/// What each thread did between two snapshots, per wall second, summed by name.
private struct ThreadRates {
    var rows: [(name: String, cpuMs: Double, voluntary: Double, involuntary: Double)] = []

    init(before: [Int: ThreadCounters], after: [Int: ThreadCounters], seconds: Double) {
        var byName: [String: (Double, Double, Double)] = [:]
        for (tid, a) in after {
            let b = before[tid] ?? ThreadCounters(name: a.name)
            var sum = byName[a.name] ?? (0, 0, 0)
            sum.0 += (a.cpu - b.cpu) * 1000 / seconds
            sum.1 += Double(a.voluntary - b.voluntary) / seconds
            sum.2 += Double(a.involuntary - b.involuntary) / seconds
            byName[a.name] = sum
        }
        rows = byName.map { (name: $0.key, cpuMs: $0.value.0, voluntary: $0.value.1, involuntary: $0.value.2) }
            .sorted { $0.name < $1.name }
    }

    var total: (cpuMs: Double, voluntary: Double, involuntary: Double) {
        rows.reduce((0, 0, 0)) { ($0.0 + $1.cpuMs, $0.1 + $1.voluntary, $0.2 + $1.involuntary) }
    }
}

func runThreadsBench(counts: [Int], seconds: Double, rounds: Int, steno: String, baseline: String?, speech: [UInt8]) {
    print("per-thread benchmark: \(counts.map(String.init).joined(separator: ", ")) sessions; idle, silent (PCM, Opus), talking;"
        + " \(format(seconds, 0)) s a phase; \(ProcessInfo.processInfo.activeProcessorCount) cores; load average \(loadAverage())")
    print("  steno: \(steno)" + (baseline.map { "; baseline (rows marked base): \($0)" } ?? ""))
    // Faint noise, as the capacity bench's pauses: what a client without silence suppression sends.
    var generator = SystemRandomNumberGenerator()
    let noiseSamples = (0..<Int((seconds + 4) * 16000)).map { _ in Float(Int(generator.next() % 61) - 30) / 32768 }
    let noisePCM = WAVFile(sampleRate: 16000, channels: 1, samples: noiseSamples).s16leBytes
    var opusFrames: [[UInt8]] = []
    if let encoder = try? OpusEncoder(sampleRate: 16000) {
        for at in stride(from: 0, to: noiseSamples.count, by: encoder.frameSamples) {
            if let packet = try? encoder.encode(noiseSamples[at..<min(noiseSamples.count, at + encoder.frameSamples)]) {
                opusFrames.append(packet)
            }
        }
    }
    let binaries = (baseline.map { [($0, " base")] } ?? []) + [(steno, "")]
    for round in 1...max(1, rounds) {
        if rounds > 1 { print("  round \(round):") }
        for count in counts {
            for (binary, label) in binaries {
                measureThreads(steno: binary, label: label, count: count, seconds: seconds, noisePCM: noisePCM,
                               opusFrames: opusFrames, speech: speech)
            }
        }
    }
    print("")
    print("  CPU: ms on the CPU per wall second (schedstat); vol/inv: voluntary/involuntary context switches per wall")
    print("  second. Per session: the phase less idle, over N. Talking: over the talk, per second of one talker's audio.")
}

private func measureThreads(steno: String, label: String, count: Int, seconds: Double, noisePCM: [UInt8],
                            opusFrames: [[UInt8]], speech: [UInt8]) {
    guard let server = Child.spawn(steno, ["serve", "--engine", "pocketsphinx", "--port", "0", "--idle-timeout", "0", "--log-level", "warning",
                                           "--recognizers", "2", "--web-root", "/nonexistent"], stdout: true),
          let port = server.readPort() else {
        print("  \(count)\(label): the server did not start")
        return
    }
    defer { server.terminate() }
    waitForRecognizers(port: port)
    _ = waitUntilQuiet(server)
    print("")
    print("  \(count) sessions\(label) (load \(loadAverage())):")
    print("    phase           thread              CPU ms/s    vol/s    inv/s")

    func show(_ phase: String, _ rates: ThreadRates, idle: ThreadRates?) {
        for r in rates.rows where r.cpuMs >= 0.05 || r.voluntary >= 0.5 {
            print("    " + pad(phase, 15) + " " + pad(r.name, 18) + " " + lpad(format(r.cpuMs, 2), 9) + " "
                + lpad(format(r.voluntary, 1), 8) + " " + lpad(format(r.involuntary, 1), 8))
        }
        let t = rates.total
        var line = "    " + pad(phase, 15) + " " + pad("all", 18) + " " + lpad(format(t.cpuMs, 2), 9) + " "
            + lpad(format(t.voluntary, 1), 8) + " " + lpad(format(t.involuntary, 1), 8)
        if let idle, count > 0 {
            let i = idle.total
            line += "   per session: \(format((t.cpuMs - i.cpuMs) / Double(count), 2)) ms/s, "
                + "\(format((t.voluntary - i.voluntary) / Double(count), 1)) wake-ups/s"
        }
        print(line)
    }

    var lastSpan = 0.0
    func measure(_ body: () -> Void) -> ThreadRates {
        let before = threadCounters(server.pid)
        let began = monotonicSeconds()
        body()
        lastSpan = monotonicSeconds() - began
        return ThreadRates(before: before, after: threadCounters(server.pid), seconds: lastSpan)
    }

    let idle = measure { usleep(useconds_t(seconds * 1_000_000)) }
    show("idle", idle, idle: nil)

    // N sessions streaming `frames` in real time; measured from 2 s in for `seconds`.
    func streaming(_ start: String, _ frames: [[UInt8]], phase: String) {
        let done = Locked(0)
        let failures = Locked<[String]>([])
        let threads = (0..<count).map { _ in
            Thread {
                do {
                    let ws = try WebSocketTestClient.connect(port: port, timeout: 30)
                    _ = try streamSession(ws, start: start, frames: frames, realTime: true) { _, _, _, _ in }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
                done.withLock { $0 += 1 }
            }
        }
        threads.forEach { $0.start() }
        usleep(2_000_000)
        let rates = measure { usleep(useconds_t(seconds * 1_000_000)) }
        while done.withLock({ $0 }) < count { usleep(50_000) }
        show(phase, rates, idle: idle)
        if let failure = failures.withLock({ $0.first }) { print("    (\(phase): a session failed: \(failure))") }
        _ = waitUntilQuiet(server)
    }
    let pcmStart = #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#
    streaming(pcmStart, pcmFrames(noisePCM), phase: "silent PCM")
    if !opusFrames.isEmpty {
        streaming(#"{"type":"start","audio":{"encoding":"opus","sampleRate":16000,"channels":1}}"#, opusFrames, phase: "silent Opus")
    }

    // Talkers, measured over the whole talk, per second of one talker's audio.
    var results: [TalkerResult] = []
    let talk = measure { results = runTalkers(count, port: port, pcm: speech) }
    show("talking", talk, idle: idle)
    let audio = Double(speech.count) / 32000
    let lags = results.flatMap(\.lags).sorted()
    let t = talk.total, i = idle.total
    print("    talking: \(format(audio, 1)) s of speech each; the server's CPU less idle, per talker's audio second: "
        + "\(format((t.cpuMs - i.cpuMs) * lastSpan / (Double(count) * audio), 1)) ms per audio s; lag p95 "
        + "\(format(lags.isEmpty ? 0 : lags[min(lags.count - 1, Int(Double(lags.count) * 0.95))], 2)) s")
}

private func lpad(_ text: String, _ width: Int) -> String { text.count >= width ? text : String(repeating: " ", count: width - text.count) + text }
