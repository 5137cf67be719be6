import Foundation
import StenoAudio
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// steno-bench server: N sessions streaming real speech in real time to a real `steno serve`
// (a release build, run as its own process so that its CPU and memory are its own), for each N:
// the lag (received − analyzed, from `progress`), the latency from `end` to `ended`, the
// server's CPU per audio second and its resident memory; next to `pocketsphinx_continuous`
// on the same audio with the same decoder options (the floor), as a ratio.
//
//   steno-bench server [--sessions 1,2,4] [--repeat 3] [--steno .build/release/steno] [--fast] FILE.wav…
//
// CPU time on these machines swings by ±30 % from run to run, so each row is measured
// `--repeat` times, interleaved with a run of the floor, and the least CPU of each is kept.
//
// Default audio: the five LibriVox sentences of the speech tests, one after the other (24.7 s).

func runServerBench(_ arguments: [String]) {
    var sessionCounts = [1, 2, 4]
    var steno = ".build/release/steno"
    var files: [String] = []
    var realTime = true
    var repeats = 3
    var index = 0
    while index < arguments.count {
        switch arguments[index] {
        case "--sessions":
            index += 1
            sessionCounts = arguments[safe: index]?.split(separator: ",").compactMap { Int($0) } ?? sessionCounts
        case "--steno":
            index += 1
            steno = arguments[safe: index] ?? steno
        case "--fast":
            realTime = false
        case "--repeat":
            index += 1
            repeats = max(1, arguments[safe: index].flatMap { Int($0) } ?? repeats)
        case let file:
            files.append(file)
        }
        index += 1
    }
    if files.isEmpty {
        let folder = "Tests/StenoSpeechTests/Resources/librivox"
        files = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
            .filter { $0.hasSuffix(".wav") }.sorted().map { "\(folder)/\($0)" }
    }
    guard FileManager.default.isExecutableFile(atPath: steno) else {
        print("server benchmark: no steno binary at \(steno) (swift build -c release --product steno)")
        return
    }

    // The audio, as 16 kHz mono: what the sessions send and what the floor decodes.
    var samples: [Float] = []
    for file in files {
        do throws(StenoError) {
            let wav = try WAVFile(path: file)
            var mono = wav.mono
            if wav.sampleRate != 16000 {
                let resampler = try Resampler(inputRate: wav.sampleRate, outputRate: 16000)
                mono = resampler.process(mono) + resampler.flush()
            }
            samples += mono
        } catch {
            print("server benchmark: \(file): \(error.message)")
            return
        }
    }
    let audio = WAVFile(sampleRate: 16000, channels: 1, samples: samples)
    let duration = audio.duration
    let pcm = audio.s16leBytes
    let wavPath = NSTemporaryDirectory() + "steno-bench-\(getpid()).wav"
    do throws(StenoError) { try audio.write(path: wavPath) } catch { print("cannot write \(wavPath)"); return }
    defer { unlink(wavPath) }

    print("server benchmark: \(files.count) file(s), \(format(duration, 1)) s of 16 kHz speech per session, "
        + (realTime ? "sent in real time (20 ms messages)" : "sent as fast as possible"))
    print("  steno: \(steno), one worker per core (\(ProcessInfo.processInfo.activeProcessorCount) cores)")
    print("")

    let loading = measureFloorLoading()
    var floor = Floor(cpuPerAudioSecond: .infinity, peakRSSMB: 0)
    var rows: [(Int, ServerRow)] = []
    for n in sessionCounts {
        var best: ServerRow?
        for _ in 0..<repeats {
            let f = measureFloor(wavPath: wavPath, duration: duration, loading: loading)
            floor = Floor(cpuPerAudioSecond: min(floor.cpuPerAudioSecond, f.cpuPerAudioSecond),
                          peakRSSMB: max(floor.peakRSSMB, f.peakRSSMB))
            guard let row = measureServer(steno: steno, sessions: n, pcm: pcm, duration: duration, realTime: realTime) else {
                continue
            }
            if best == nil || row.cpuSeconds < best!.cpuSeconds { best = row }
        }
        if let best { rows.append((n, best)) } else { print("  \(n) sessions: failed") }
    }

    print("  floor: pocketsphinx_continuous -infile (same decoder options), "
        + "\(format(floor.cpuPerAudioSecond * 1000, 0)) ms CPU per audio s, peak RSS \(format(floor.peakRSSMB, 0)) MB")
    print("")
    print("  sessions   lag mean   lag p95   lag max   end→ended   CPU ms/audio s   ×floor   RSS MB   RSS/session   finals")
    for (n, row) in rows {
        let cpu = row.cpuSeconds / (duration * Double(n))
        print("  " + [pad("\(n)", 8), pad(format(row.lagMean, 3) + " s", 10), pad(format(row.lagP95, 3) + " s", 9),
                      pad(format(row.lagMax, 3) + " s", 9), pad(format(row.endLatencyMean, 3) + " s", 11),
                      pad(format(cpu * 1000, 0), 16), pad(format(cpu / floor.cpuPerAudioSecond, 2) + "×", 8),
                      pad(format(row.rssMB, 0), 8), pad(format(row.rssMB / Double(n), 0), 13),
                      pad("\(row.finals)", 8)].joined(separator: " "))
    }
    print("")
    print("  lag: received − analyzed in each progress event, all sessions; end→ended: from sending end to")
    print("  receiving ended, mean over sessions; CPU: the server process's user+system time during the")
    print("  measured round ÷ audio seconds analyzed; RSS: the server's resident memory after the round")
    print("  (every session's recognizer is still pooled). A warm-up round first makes the recognizers.")
}

// MARK: - The floor

private struct Floor {
    var cpuPerAudioSecond: Double
    var peakRSSMB: Double
}

private let floorModel = "/usr/share/pocketsphinx/model/en-us"

/// One `pocketsphinx_continuous -infile` run with Steno's decoder options: CPU seconds, peak RSS.
private func runFloor(_ file: String) -> (cpu: Double, rss: Double) {
    let args = ["-infile", file, "-hmm", "\(floorModel)/en-us", "-lm", "\(floorModel)/en-us.lm.bin",
                "-dict", "\(floorModel)/cmudict-en-us.dict", "-logfn", "/dev/null", "-maxhmmpf", "5000", "-maxwpf", "20"]
    guard let child = Child.spawn("/usr/bin/pocketsphinx_continuous", args, stdout: false) else { return (0, 0) }
    let usage = child.waitWithUsage()
    return (usage.cpu, usage.maxRSSMB)
}

/// The CLI's model loading: the least CPU of three runs on 0.1 s of silence.
private func measureFloorLoading() -> Double {
    let silencePath = NSTemporaryDirectory() + "steno-bench-silence-\(getpid()).wav"
    try? WAVFile(sampleRate: 16000, channels: 1, samples: [Float](repeating: 0, count: 1600)).write(path: silencePath)
    defer { unlink(silencePath) }
    return (0..<3).map { _ in runFloor(silencePath).cpu }.min() ?? 0
}

/// `pocketsphinx_continuous` on the file, minus its model loading.
private func measureFloor(wavPath: String, duration: Double, loading: Double) -> Floor {
    let run = runFloor(wavPath)
    return Floor(cpuPerAudioSecond: max(0, run.cpu - loading) / duration, peakRSSMB: run.rss)
}

// MARK: - The server

private struct ServerRow {
    var lagMean = 0.0, lagP95 = 0.0, lagMax = 0.0
    var endLatencyMean = 0.0
    var cpuSeconds = 0.0
    var rssMB = 0.0
    var finals = 0
}

private func measureServer(steno: String, sessions n: Int, pcm: [UInt8], duration: Double, realTime: Bool) -> ServerRow? {
    guard let server = Child.spawn(steno, ["serve", "--port", "0", "--max-sessions", "\(n)", "--idle-timeout", "0",
                                           "--log-level", "warning", "--web-root", "/nonexistent"], stdout: true),
          let port = server.readPort() else { return nil }
    defer { server.terminate() }

    // Warm-up: every session's recognizer is made (≈0.5 s each), then kept for reuse.
    _ = runSessions(port: port, count: n, pcm: Array(pcm.prefix(32000 * 2)), realTime: false)

    let cpuBefore = server.cpuSeconds()
    let results = runSessions(port: port, count: n, pcm: pcm, realTime: realTime)
    let cpuAfter = server.cpuSeconds()
    guard results.count == n else { return nil }

    var row = ServerRow()
    let lags = results.flatMap(\.lags).sorted()
    if !lags.isEmpty {
        row.lagMean = lags.reduce(0, +) / Double(lags.count)
        row.lagP95 = lags[min(lags.count - 1, Int(Double(lags.count) * 0.95))]
        row.lagMax = lags.last ?? 0
    }
    row.endLatencyMean = results.map(\.endLatency).reduce(0, +) / Double(n)
    row.cpuSeconds = cpuAfter - cpuBefore
    row.rssMB = server.residentMB()
    row.finals = results.map(\.finals).reduce(0, +)
    return row
}

private struct SessionResult: Sendable {
    var lags: [Double] = []
    var endLatency = 0.0
    var finals = 0
}

/// `count` sessions at once, each on its own thread, sending `pcm` (16 kHz s16le) in 20 ms
/// messages, in real time or as fast as the server reads; nil entries for sessions that failed.
private func runSessions(port: Int, count: Int, pcm: [UInt8], realTime: Bool) -> [SessionResult] {
    let results = Locked<[SessionResult]>([])
    let threads = (0..<count).map { _ in
        Thread {
            if let result = runSession(port: port, pcm: pcm, realTime: realTime) {
                results.withLock { $0.append(result) }
            }
        }
    }
    threads.forEach { $0.start() }
    while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
    return results.withLock { $0 }
}

private func runSession(port: Int, pcm: [UInt8], realTime: Bool) -> SessionResult? {
    do {
        let ws = try WebSocketTestClient.connect(port: port, timeout: 30)
        try ws.sendText(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#)
        var result = SessionResult()
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
            case "final": result.finals += 1
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
        let step = 640  // 20 ms
        let start = monotonicSeconds()
        var offset = 0, index = 0
        while offset < pcm.count {
            let end = min(pcm.count, offset + step)
            try ws.sendBinary(Array(pcm[offset..<end]), timeout: 60)
            offset = end
            index += 1
            try readAvailable(waitingUntil: realTime ? start + Double(index) * 0.02 : 0)
        }
        endSentAt = monotonicSeconds()
        try ws.sendText(#"{"type":"end"}"#)
        while !ended { try handle(ws.receive(timeout: 120)) }
        _ = try? ws.close()
        return result
    } catch {
        print("  session failed: \(error)")
        return nil
    }
}

// MARK: - Processes

/// A child process: its pid, its stdout (if captured), its CPU and memory from /proc.
final class Child {
    let pid: pid_t
    let stdoutFD: Int32?

    private init(pid: pid_t, stdoutFD: Int32?) {
        self.pid = pid
        self.stdoutFD = stdoutFD
    }

    /// Standard error goes to `stderrPath` (appended), or nowhere.
    static func spawn(_ path: String, _ arguments: [String], stdout capture: Bool, stderrPath: String? = nil) -> Child? {
        var fds: [Int32] = [-1, -1]
        if capture { guard pipe(&fds) == 0 else { return nil } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if capture {
            posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
            posix_spawn_file_actions_addclose(&actions, fds[0])
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, path, &actions, nil, argv, environ) == 0 else { return nil }
        if capture { close(fds[1]) }
        return Child(pid: pid, stdoutFD: capture ? fds[0] : nil)
    }

    /// Reads stdout until the `listening on http://host:PORT` line.
    func readPort() -> Int? {
        guard let fd = stdoutFD else { return nil }
        var text = ""
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 {
            if byte == UInt8(ascii: "\n") {
                if let range = text.range(of: "listening on "), let colon = text[range.upperBound...].lastIndex(of: ":") {
                    return Int(text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                text = ""
            } else {
                text.append(Character(UnicodeScalar(byte)))
            }
        }
        return nil
    }

    /// User + system CPU seconds so far (/proc/PID/stat).
    func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3 → utime is field 14, stime 15 (1-based in proc(5)).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident memory now, in MB (/proc/PID/status VmRSS).
    func residentMB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kb = line.split(separator: " ").compactMap { Double($0) }.first ?? 0
            return kb / 1024
        }
        return 0
    }

    func waitWithUsage() -> (cpu: Double, maxRSSMB: Double) {
        var status: Int32 = 0
        var usage = rusage()
        _ = wait4(pid, &status, 0, &usage)
        let cpu = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return (cpu, Double(usage.ru_maxrss) / 1024)
    }

    func send(signal number: Int32) { kill(pid, number) }

    /// The exit status once the process has ended (nil while it runs); reaps it.
    func pollExit() -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        if let fd = stdoutFD { close(fd) }
        return exitStatus
    }
    private var exitStatus: Int32?

    func terminate() {
        if exitStatus != nil { return }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        if let fd = stdoutFD { close(fd) }
    }
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

private func format(_ value: Double, _ decimals: Int) -> String {
    String(format: "%.\(decimals)f", value)
}

private func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
