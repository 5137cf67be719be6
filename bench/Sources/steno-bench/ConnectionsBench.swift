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

// steno-bench connections: many connected sessions in one `steno serve` (a release build, its
// own process), on each event loop side by side, and a few talkers among them. For each
// number of sessions N and each loop:
//
// - the server's resident memory with no connection and with N silent sessions (RSS per
//   session), and its CPU over a fixed interval with none and with N (from /proc/PID/stat);
// - how fast the N handshakes go (first and last thousand apart, to see whether a handshake
//   costs more as sessions pile up);
// - readiness at that scale: `/readyz` during the ramp and with N connected (200 while a new
//   session fits), 503 `full` once the connection limit is reached, 200 again once a session
//   has ended; `/healthz` counts the sessions;
// - `--talkers` sessions among the N speaking real speech in real time (the LibriVox
//   sentences of the speech tests): their lag (received − analyzed, from `progress`), the
//   latency of each final from the moment its last audio was sent, and end→ended;
// - SIGTERM: every session gets its close frame (1001) and the server exits 0.
//
//   steno-bench connections [--count 1000,10000] [--loops libuv,poll] [--talkers 2]
//                           [--interval 20] [--keepalive 10] [--sparse 0] [--in-flight 128]
//                           [--noise DBFS] [--engine pocketsphinx|whisper]
//                           [--steno .build/release/steno] [--baseline OTHER/steno]
//                           [--log-level warning]
//   steno-bench connections --wakeups 1,2,4 [--rounds 2] [--steno .build/release/steno]
//   steno-bench connections --threads 4,8 [--seconds 20] [--rounds 1] [--baseline OTHER/steno]
//
// With `--baseline`, every row is measured with that binary too, just before (an older build,
// for a before-and-after in one run). `--wakeups` measures something else: the server's CPU
// and context switches per audio second for a few live talkers, with the audio batched and
// not, against the engine fed in real time (below, "Fewer wake-ups").
//
// The silent sessions are this process: one thread, epoll over raw non-blocking sockets. Each
// connection upgrades to /v1/stream, sends `start` (16 kHz PCM), reads `ready`, and then sends
// nothing but the pongs the server's keepalive pings ask for (with `--sparse S`, also a
// `silence` message of S seconds every S seconds, as a quiet client that suppresses silence
// does; with `--noise DBFS`, instead, 100 ms of PCM noise at that level every 100 ms, as a
// quiet room's microphone that does not suppress silence sends, from once all are ready and
// settled: a crowd of quiet clients that admission must not take for talkers). At most
// `--in-flight` handshakes are under way at once, so that the listen backlog
// never overflows into SYN retries (which would measure the kernel's 1 s retry timer, not the
// server). The talkers are threads of their own with blocking sockets.

func runConnectionsBench(_ arguments: [String]) {
    var counts = [1_000, 10_000]
    var loops = ["libuv", "poll"]
    var interval = 20.0
    var keepalive = 10
    var talkers = 2
    var sparse = 0.0
    var noise: Double?
    var engine = "pocketsphinx"
    var inFlight = 128
    var steno = ".build/release/steno"
    var baseline: String?
    var wakeups: [Int] = []
    var threads: [Int] = []
    var seconds = 20.0
    var rounds = 2
    var logLevel = "warning"
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? arguments[index + 1] : ""
        switch arguments[index] {
        case "--count": counts = value.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }; index += 1
        case "--loops": loops = value.split(separator: ",").map(String.init); index += 1
        case "--interval": interval = max(1, Double(value) ?? interval); index += 1
        case "--keepalive": keepalive = max(0, Int(value) ?? keepalive); index += 1
        case "--talkers": talkers = max(0, Int(value) ?? talkers); index += 1
        case "--sparse": sparse = max(0, Double(value) ?? sparse); index += 1
        case "--noise": noise = Double(value); index += 1
        case "--engine": engine = value; index += 1
        case "--in-flight": inFlight = max(1, Int(value) ?? inFlight); index += 1
        case "--steno": steno = value; index += 1
        case "--baseline": baseline = value; index += 1
        case "--wakeups": wakeups = value.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }; index += 1
        case "--threads": threads = value.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }; index += 1
        case "--seconds": seconds = max(2, Double(value) ?? seconds); index += 1
        case "--rounds": rounds = max(1, Int(value) ?? rounds); index += 1
        case "--log-level": logLevel = value; index += 1
        default: print("connections benchmark: unknown argument \(arguments[index])"); return
        }
        index += 1
    }
    guard FileManager.default.isExecutableFile(atPath: steno) else {
        print("connections benchmark: no steno binary at \(steno) (swift build -c release --product steno)")
        return
    }
    if let baseline, !FileManager.default.isExecutableFile(atPath: baseline) {
        print("connections benchmark: no steno binary at \(baseline) (--baseline)")
        return
    }
    guard let speech = loadTalkerSpeech() else { return }
    if !threads.isEmpty {
        runThreadsBench(counts: threads, seconds: seconds, rounds: rounds, steno: steno, baseline: baseline, speech: speech)
        return
    }
    if !wakeups.isEmpty {
        runWakeupsBench(talkerCounts: wakeups, rounds: rounds, steno: steno, speech: speech)
        return
    }
    // This process holds one socket per connection too.
    let limit = OpenFileLimit.raise()
    let largest = counts.max() ?? 0
    print("connections benchmark: N silent sessions (start, 16 kHz PCM, then "
        + (noise.map { "100 ms of noise at \(format($0, 0)) dBFS every 100 ms" }
           ?? (sparse > 0 ? "a \(format(sparse, 0)) s silence message every \(format(sparse, 0)) s" : "nothing"))
        + "), keepalive \(keepalive) s, \(talkers) of them talking")
    print("  (\(format(Double(speech.count) / 32000, 1)) s of speech each, in real time); CPU measured over \(format(interval, 0)) s;"
        + " \(ProcessInfo.processInfo.activeProcessorCount) cores shared by the server and this client")
    print("  steno: \(steno)" + (baseline.map { "; baseline (rows marked base): \($0)" } ?? "") + "; open files here: \(limit)")
    if limit.soft < UInt64(largest + talkers + 64) {
        print("  the client cannot hold \(largest) sockets with this limit: raise the hard limit (ulimit -Hn)")
        return
    }
    print("")

    var rows: [ConnectionsRow] = []
    for count in counts {
        for loop in loops {
            for (binary, label) in (baseline.map { [($0, " base")] } ?? []) + [(steno, "")] {
                guard var row = measureConnections(
                    steno: binary, loop: loop, count: count, talkers: talkers, speech: speech, interval: interval,
                    keepalive: keepalive, sparse: sparse, noise: noise, engine: engine, inFlight: inFlight,
                    logLevel: logLevel) else {
                    print("  \(loop)\(label), \(count) sessions: failed")
                    continue
                }
                row.loop += label
                print("  \(row.loop), \(count): \(row.summary) (load \(loadAverage()))")
                rows.append(row)
            }
        }
    }
    print("")
    print("  loop         sessions   handshakes/s (first, last 1,000)   RSS/session   CPU idle   CPU with N   per 1,000")
    for r in rows {
        print("  " + [rightAligned(r.loop, 10), rightAligned("\(r.ready)/\(r.count)", 11),
                      rightAligned("\(format(r.handshakeRate, 0)) (\(format(r.firstThousandRate, 0)), \(format(r.lastThousandRate, 0)))", 34),
                      rightAligned(format(r.kbPerSession, 1) + " KB", 13), rightAligned(format(r.idleCPUms, 1) + " ms/s", 10),
                      rightAligned(format(r.loadedCPUms, 1) + " ms/s", 12), rightAligned(format(r.cpuPerThousandMs, 1) + " ms/s", 11)]
            .joined(separator: " "))
    }
    print("")
    print("  loop         sessions   talkers: lag p95  max   final p50  p95  max   end→ended   /readyz: ramp  with N  at limit  after   drain   exit")
    for r in rows {
        print("  " + [rightAligned(r.loop, 10), rightAligned("\(r.count)", 11),
                      rightAligned(r.talk.map { format($0.lagP95, 2) } ?? "-", 18), rightAligned(r.talk.map { format($0.lagMax, 2) } ?? "-", 5),
                      rightAligned(r.talk.map { format($0.finalP50, 2) } ?? "-", 11), rightAligned(r.talk.map { format($0.finalP95, 2) } ?? "-", 5),
                      rightAligned(r.talk.map { format($0.finalMax, 2) } ?? "-", 5), rightAligned(r.talk.map { format($0.endLatency, 2) + " s" } ?? "-", 11),
                      rightAligned(r.readiness.ramp, 15), rightAligned(r.readiness.withN, 7), rightAligned(r.readiness.atLimit, 9),
                      rightAligned(r.readiness.afterOneEnded, 6), rightAligned(format(r.drainSeconds, 1) + " s", 7),
                      rightAligned(r.exitStatus.map(String.init) ?? "-", 5)].joined(separator: " "))
    }
    print("")
    print("  handshakes/s: upgrades (101) per second from the first connect to the last 101 (the client shares")
    print("  the cores). RSS/session: the server's VmRSS with every session ready and settled 3 s, minus")
    print("  VmRSS with no connection (once it has made its shared decoders and gone quiet), over N. CPU: the")
    print("  server's user+system time per second with no connection, and with N silent sessions; per 1,000:")
    print("  the difference per 1,000 sessions. Talkers (seconds): lag = received − analyzed in their progress")
    print("  events; final = from sending the audio at a final's end to receiving the final (finals made by")
    print("  `end` left out); end→ended, mean. /readyz: what it answered during the ramp (asked every")
    print("  second), with N connected (room for \(talkers + 1) more), once the connection limit is")
    print("  reached (\"full\" expected), and after one of those sessions ended (200 expected). drain: from")
    print("  SIGTERM until every session had its close frame (1001) and the connection was gone; exit: the")
    print("  server's exit status.")
}

struct TalkerStats {
    var lagP95 = 0.0, lagMax = 0.0
    var finalP50 = 0.0, finalP95 = 0.0, finalMax = 0.0
    var finals = 0
    var endLatency = 0.0
    var cpuPerAudioSecondMs = 0.0
}

struct Readiness {
    var ramp = "-"
    var withN = "-"
    var atLimit = "-"
    var afterOneEnded = "-"
    var healthzSessions = -1
}

struct ConnectionsRow {
    var loop = ""
    var count = 0
    var ready = 0
    var handshakeRate = 0.0
    var readyAfter = 0.0
    var rssBeforeMB = 0.0
    var rssWithMB = 0.0
    var idleCPUms = 0.0
    var loadedCPUms = 0.0
    var closed1001 = 0
    var cut = 0
    var otherCloses: [UInt16: Int] = [:]
    var pings = 0
    var drainSeconds = 0.0
    var exitStatus: Int32?
    var settleSeconds = 0.0
    var firstThousandRate = 0.0
    var lastThousandRate = 0.0
    var firstClose = 0.0, lastClose = 0.0, exitAfter = 0.0
    var talk: TalkerStats?
    var readiness = Readiness()
    var readyzSlowestMs = 0.0

    var kbPerSession: Double { ready == 0 ? 0 : (rssWithMB - rssBeforeMB) * 1024 / Double(ready) }
    var cpuPerThousandMs: Double { ready == 0 ? 0 : (loadedCPUms - idleCPUms) / (Double(ready) / 1000) }

    var summary: String {
        var text = "quiet after \(format(settleSeconds, 0)) s; \(ready)/\(count) ready in \(format(readyAfter, 1)) s, "
            + "RSS \(format(rssBeforeMB, 1)) → \(format(rssWithMB, 1)) MB, "
            + "CPU \(format(idleCPUms, 1)) → \(format(loadedCPUms, 1)) ms/s, \(pings) pings answered; "
            + "/readyz slowest \(format(readyzSlowestMs, 0)) ms, /healthz sessions \(readiness.healthzSessions); "
        if let talk {
            text += "talkers: \(talk.finals) finals, CPU \(format(talk.cpuPerAudioSecondMs, 0)) ms per audio s; "
        }
        text += "drain \(format(drainSeconds, 1)) s (close frames from \(format(firstClose, 1)) to \(format(lastClose, 1)) s, "
            + "exit after \(format(exitAfter, 1)) s): \(closed1001) closed 1001, \(cut) cut"
        if !otherCloses.isEmpty {
            text += ", \(otherCloses.values.reduce(0, +)) other close codes (\(otherCloses.keys.sorted().prefix(5).map(String.init).joined(separator: ", "))…)"
        }
        return text
    }
}

/// The talkers' audio: the LibriVox sentences of the speech tests, 16 kHz s16le.
func loadTalkerSpeech() -> [UInt8]? {
    let folder = "Tests/StenoSpeechTests/Resources/librivox"
    let files = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
        .filter { $0.hasSuffix(".wav") }.sorted().map { "\(folder)/\($0)" }
    guard !files.isEmpty else { print("connections benchmark: no speech in \(folder)"); return nil }
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
            print("connections benchmark: \(file): \(error.message)")
            return nil
        }
    }
    return WAVFile(sampleRate: 16000, channels: 1, samples: samples).s16leBytes
}

private func measureConnections(steno: String, loop: String, count: Int, talkers: Int, speech: [UInt8],
                                interval: Double, keepalive: Int, sparse: Double, noise: Double? = nil,
                                engine: String = "pocketsphinx", inFlight: Int,
                                logLevel: String) -> ConnectionsRow? {
    let logPath = NSTemporaryDirectory() + "steno-bench-connections-\(getpid())-\(loop)-\(count).log"
    unlink(logPath)
    // Room for the N sessions, the talkers and one more: readiness says 200 with all of them
    // connected, and "full" once one more has come.
    let maxSessions = count + talkers + 1
    var arguments = ["serve", "--engine", engine, "--port", "0", "--event-loop", loop, "--max-sessions", "\(maxSessions)",
                     "--keepalive", "\(keepalive)", "--drain-timeout", "30",
                     "--log-level", logLevel, "--web-root", "/nonexistent"]
    // A silent session that sends nothing would be closed by the idle timeout; one that sends
    // silence messages is active.
    if sparse == 0 && noise == nil { arguments += ["--idle-timeout", "0"] }
    guard let server = Child.spawn(steno, arguments, stdout: true, stderrPath: logPath),
          let port = server.readPort() else {
        print("  \(loop): the server did not start (log: \(logPath))")
        return nil
    }
    defer { server.terminate() }
    var row = ConnectionsRow()
    row.loop = loop
    row.count = count

    // The server alone, once it has made its shared decoders in the background (≈0.5 s and
    // ≈95 MB each): its memory, and what it burns doing nothing.
    row.settleSeconds = waitUntilQuiet(server)
    row.rssBeforeMB = server.residentMB()
    let idleStart = (server.cpuSeconds(), monotonicSeconds())
    usleep(useconds_t(interval * 1_000_000))
    row.idleCPUms = (server.cpuSeconds() - idleStart.0) / (monotonicSeconds() - idleStart.1) * 1000

    // The ramp, with /readyz asked every second from another thread meanwhile.
    let client = SilentClients(port: port, count: count, inFlight: inFlight)
    guard client.ready else { print("  \(loop): the client could not set up epoll"); return nil }
    let prober = BackgroundProber(port: port, every: 1)
    let began = monotonicSeconds()
    client.run(until: began + 600) { client.readyCount + client.failedCount >= count }
    let probes = prober.stop()
    row.ready = client.readyCount
    row.handshakeRate = Double(client.upgradedCount) / max(1e-9, client.lastUpgradeAt - began)
    row.readyAfter = client.lastReadyAt - began
    // The first and the last thousand: whether a handshake costs more as connections pile up.
    if let first = client.thousands.first {
        row.firstThousandRate = 1000 / max(1e-9, first - began)
    }
    if client.thousands.count >= 2 {
        let n = client.thousands.count
        row.lastThousandRate = 1000 / max(1e-9, client.thousands[n - 1] - client.thousands[n - 2])
    } else {
        row.lastThousandRate = row.firstThousandRate
    }
    if client.failedCount > 0 {
        print("  \(loop): \(client.failedCount) connections failed: \(client.failures.prefix(5))")
    }
    row.readiness.ramp = probes.summary

    // Settled: what N silent sessions hold, then what they cost over the interval.
    client.run(until: monotonicSeconds() + 3) { false }
    row.rssWithMB = server.residentMB()
    if let noise {
        client.startSparse(every: 0.1, frame: maskedFrame(opcode: 2, noisePCM(seconds: 0.1, dBFS: noise)))
    } else if sparse > 0 {
        client.startSparse(every: sparse)
    }
    let loadedStart = (server.cpuSeconds(), monotonicSeconds())
    client.run(until: loadedStart.1 + interval) { false }
    let loadedEnd = (server.cpuSeconds(), monotonicSeconds())
    row.loadedCPUms = (loadedEnd.0 - loadedStart.0) / (loadedEnd.1 - loadedStart.1) * 1000

    var withN = ReadinessProbes(port: port)
    withN.ask("/readyz")
    row.readiness.withN = withN.summary
    row.readiness.healthzSessions = withN.healthzSessions()

    // The talkers, while the silent sessions are served on this thread.
    if talkers > 0 {
        let results = Locked<[TalkerResult]>([])
        let cpuBefore = server.cpuSeconds()
        let talkStart = monotonicSeconds()
        let threads = (0..<talkers).map { k in
            Thread {
                // Started 1.5 s apart, so that their utterances do not end together.
                usleep(useconds_t(k) * 1_500_000)
                let result = runTalker(port: port, pcm: speech)
                results.withLock { $0.append(result) }
            }
        }
        threads.forEach { $0.start() }
        client.run(until: talkStart + Double(speech.count) / 32000 + Double(talkers) * 1.5 + 120) {
            results.withLock { $0.count } == talkers
        }
        let talkSeconds = monotonicSeconds() - talkStart
        let cpu = server.cpuSeconds() - cpuBefore - (row.loadedCPUms / 1000) * talkSeconds
        let done = results.withLock { $0 }
        if done.contains(where: { $0.failure != nil }) {
            print("  \(loop): talkers failed: \(done.compactMap(\.failure))")
        }
        row.talk = TalkerStats(done, cpuSeconds: cpu, audioSeconds: Double(speech.count) / 32000 * Double(talkers))
    }

    // The connection limit: the talkers have gone, so N + talkers + 1 more sessions fill it.
    client.add(talkers + 1)
    client.run(until: monotonicSeconds() + 30) { client.readyCount + client.failedCount >= client.count }
    var atLimit = ReadinessProbes(port: port)
    atLimit.ask("/readyz")
    row.readiness.atLimit = atLimit.summary
    // One ends its session (cancel: a session whose connection only drops waits to be
    // resumed, and holds its place): readiness comes back.
    client.cancelOne()
    var after = ReadinessProbes(port: port)
    let asked = monotonicSeconds()
    while monotonicSeconds() - asked < 10 {
        client.run(until: monotonicSeconds() + 0.2) { false }
        if after.ask("/readyz") == 200 { break }
    }
    row.readiness.afterOneEnded = after.last
    row.readyzSlowestMs = max(probes.slowestMs, withN.slowestMs, atLimit.slowestMs, after.slowestMs)

    // SIGTERM: every session should get `shutting_down` and close 1001, and the server exit 0.
    let signalled = monotonicSeconds()
    server.send(signal: SIGTERM)
    client.run(until: signalled + 90) { client.openCount == 0 }
    row.drainSeconds = monotonicSeconds() - signalled
    row.firstClose = client.firstCloseAt > 0 ? client.firstCloseAt - signalled : 0
    row.lastClose = client.lastCloseAt > 0 ? client.lastCloseAt - signalled : 0
    row.closed1001 = client.closeCodes[1001, default: 0]
    row.otherCloses = client.closeCodes.filter { $0.key != 1001 }
    row.cut = client.cutCount + client.openCount
    row.pings = client.pingCount
    let deadline = monotonicSeconds() + 30
    while server.pollExit() == nil && monotonicSeconds() < deadline { usleep(20_000) }
    row.exitStatus = server.pollExit()
    row.exitAfter = monotonicSeconds() - signalled
    client.closeAll()
    return row
}

/// Waits until the server uses less than 2 % of a core for two seconds in a row (at most 60 s);
/// returns how long that took.
func waitUntilQuiet(_ server: Child) -> Double {
    let began = monotonicSeconds()
    var quiet = 0
    var last = server.cpuSeconds()
    while quiet < 2 && monotonicSeconds() - began < 60 {
        usleep(1_000_000)
        let now = server.cpuSeconds()
        quiet = now - last < 0.02 ? quiet + 1 : 0
        last = now
    }
    return monotonicSeconds() - began
}

// MARK: - Readiness

/// `/readyz` asked again and again on a thread of its own (the client's thread goes on).
private final class BackgroundProber {
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
private struct ReadinessProbes: Sendable {
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
    fileprivate init(_ results: [TalkerResult], cpuSeconds: Double, audioSeconds: Double) {
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

// MARK: - The client

/// N WebSocket connections on one thread: non-blocking sockets, level-triggered epoll.
private final class SilentClients {
    enum Phase { case connecting, upgrading, starting, silent, closed }

    final class Connection {
        let fd: Int32
        var phase = Phase.connecting
        var input: [UInt8] = []
        var sawClose = false
        init(fd: Int32) { self.fd = fd }
    }

    let port: Int
    /// Connections to open (`add` raises it).
    private(set) var count: Int
    let inFlight: Int
    let epoll: Int32
    var connections: [Int32: Connection] = [:]
    var opened = 0
    var handshaking = 0
    private(set) var upgradedCount = 0
    private(set) var readyCount = 0
    private(set) var failedCount = 0
    private(set) var cutCount = 0
    private(set) var pingCount = 0
    private(set) var closeCodes: [UInt16: Int] = [:]
    private(set) var failures: [String] = []
    private(set) var lastUpgradeAt = 0.0
    private(set) var lastReadyAt = 0.0
    private(set) var firstCloseAt = 0.0
    private(set) var lastCloseAt = 0.0
    /// When each 1,000th upgrade came.
    private(set) var thousands: [Double] = []
    var ready: Bool { epoll >= 0 }
    /// Connections not yet closed (closed ones leave the table).
    var openCount: Int { connections.count }

    private let request: [UInt8]
    private let startFrame: [UInt8]
    /// Sessions that answered ready, in order (for the sparse messages and `cancelOne`).
    private var silentFDs: [Int32] = []
    private var sparseEvery = 0.0
    private var sparseStart = 0.0
    private var sparseSent = 0
    private var sparseFrame: [UInt8] = []
    /// The connection `cancelOne` ended: its close (1000) is not counted with the others.
    private var cancelledFD: Int32 = -1

    init(port: Int, count: Int, inFlight: Int) {
        self.port = port
        self.count = count
        self.inFlight = inFlight
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        request = upgradeRequest(port: port)
        startFrame = maskedFrame(opcode: 1, Array(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#.utf8))
    }

    deinit {
        closeAll()
        if epoll >= 0 { close(epoll) }
    }

    /// Opens `more` connections too, on the next `run`.
    func add(_ more: Int) { count += more }

    /// From now on each silent session sends a `silence` message of `seconds` every `seconds`
    /// (spread evenly over the interval).
    func startSparse(every seconds: Double, frame: [UInt8]? = nil) {
        sparseEvery = seconds
        sparseStart = monotonicSeconds()
        sparseSent = 0
        sparseFrame = frame ?? maskedFrame(opcode: 1, Array(#"{"type":"silence","duration":\#(seconds)}"#.utf8))
    }

    /// Ends the last session that became ready with `cancel` (the server closes it, 1000).
    func cancelOne() {
        guard let fd = silentFDs.last, let c = connections[fd] else { return }
        cancelledFD = fd
        _ = send(c, maskedFrame(opcode: 1, Array(#"{"type":"cancel"}"#.utf8)))
    }

    func closeAll() {
        for c in connections.values { close(c.fd) }
        connections.removeAll()
    }

    /// Services the connections until `done()` holds or `deadline` passes, opening new ones
    /// while fewer than `count` were opened and fewer than `inFlight` are mid-handshake.
    func run(until deadline: Double, _ done: () -> Bool) {
        var events = [epoll_event](repeating: epoll_event(), count: 1024)
        while !done() {
            while opened < count && handshaking < inFlight { openOne() }
            let now = monotonicSeconds()
            if now >= deadline { return }
            if sparseEvery > 0 { sendSparse(now) }
            let wait = Int32(min(sparseEvery > 0 ? 10 : 100, max(1, (deadline - now) * 1000)))
            let n = epoll_wait(epoll, &events, Int32(events.count), wait)
            if n < 0 { if errno == EINTR { continue }; return }
            for i in 0..<Int(n) {
                let fd = events[i].data.fd
                guard let c = connections[fd] else { continue }
                service(c, events[i].events)
            }
        }
    }

    private func sendSparse(_ now: Double) {
        guard !silentFDs.isEmpty else { return }
        let due = Int((now - sparseStart) / sparseEvery * Double(silentFDs.count)) - sparseSent
        for _ in 0..<max(0, min(due, silentFDs.count)) {
            let fd = silentFDs[sparseSent % silentFDs.count]
            sparseSent += 1
            if fd != cancelledFD, let c = connections[fd], c.phase == .silent { _ = send(c, sparseFrame) }
        }
    }

    private func openOne() {
        opened += 1
        let fd: Int32
        switch connectNonBlocking(port: port) {
        case .success(let socket): fd = socket
        case .failure(let error): fail(error.description); return
        }
        let c = Connection(fd: fd)
        connections[fd] = c
        handshaking += 1
        watch(fd, EPOLL_CTL_ADD, EPOLLOUT.rawValue)
    }

    private func watch(_ fd: Int32, _ op: Int32, _ events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        epoll_ctl(epoll, op, fd, &event)
    }

    private func service(_ c: Connection, _ events: UInt32) {
        if c.phase == .connecting {
            let error = connectError(c.fd)
            if error != 0 { drop(c, failure: "connect: \(String(cString: strerror(error)))"); return }
            guard send(c, request) else { return }
            c.phase = .upgrading
            watch(c.fd, EPOLL_CTL_MOD, EPOLLIN.rawValue)
            return
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(c.fd, &buffer, buffer.count)
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        if n <= 0 {
            if c.phase == .silent {
                if !c.sawClose { cutCount += 1 }
                finish(c)
            } else {
                drop(c, failure: "closed before ready (\(c.phase))")
            }
            return
        }
        c.input.append(contentsOf: buffer[0..<n])
        if c.phase == .upgrading {
            guard let end = httpHeadEnd(c.input) else { return }
            let head = String(decoding: c.input[0..<end], as: UTF8.self)
            c.input.removeFirst(end + 4)
            guard head.hasPrefix("HTTP/1.1 101") else {
                drop(c, failure: String(head.prefix(while: { $0 != "\r" })))
                return
            }
            upgradedCount += 1
            lastUpgradeAt = monotonicSeconds()
            if upgradedCount % 1000 == 0 { thousands.append(lastUpgradeAt) }
            c.phase = .starting
            guard send(c, startFrame) else { return }
        }
        readFrames(c)
    }

    private func readFrames(_ c: Connection) {
        while let frame = takeServerFrame(&c.input) {
            let payload = frame.payload
            switch frame.opcode {
            case 1:
                if c.phase == .starting, payload.starts(with: Array(#"{"type":"ready""#.utf8)) {
                    c.phase = .silent
                    handshaking -= 1
                    readyCount += 1
                    silentFDs.append(c.fd)
                    lastReadyAt = monotonicSeconds()
                }
            case 8:
                let code = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
                if !c.sawClose {
                    c.sawClose = true
                    if c.fd != cancelledFD {
                        closeCodes[code, default: 0] += 1
                        if firstCloseAt == 0 { firstCloseAt = monotonicSeconds() }
                        lastCloseAt = monotonicSeconds()
                    }
                    _ = send(c, maskedFrame(opcode: 8, Array(payload.prefix(2))))
                }
            case 9:
                pingCount += 1
                _ = send(c, maskedFrame(opcode: 10, payload))
            default:
                break
            }
        }
    }

    /// Writes all of `bytes` (small: a handshake or a frame fits the socket buffer).
    private func send(_ c: Connection, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(c.fd, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                if c.phase == .silent { cutCount += 1; finish(c) } else { drop(c, failure: "write failed") }
                return false
            }
            offset += n
        }
        return true
    }

    private func drop(_ c: Connection, failure: String) {
        fail(failure)
        finish(c)
    }

    private func fail(_ why: String) {
        failedCount += 1
        handshaking -= 1
        if failures.count < 20 { failures.append(why) }
    }

    private func finish(_ c: Connection) {
        guard c.phase != .closed else { return }
        c.phase = .closed
        epoll_ctl(epoll, EPOLL_CTL_DEL, c.fd, nil)
        close(c.fd)
        connections[c.fd] = nil
    }
}



// MARK: - Fewer wake-ups (`--wakeups`)

// steno-bench connections --wakeups 1,2,4 [--rounds 2]: what batching the audio saves. For
// each number of talkers T, side by side in one run and interleaved by round:
//
// - the floor: T `pocketsphinx_continuous -infile /dev/stdin` processes (Steno's decoder
//   options), each fed the talkers' speech as raw PCM through a pipe in real time, 20 ms per
//   write, the CPU and context switches counted from when its model is loaded until it has
//   finished the audio;
// - `steno serve` as it is (audio to the worker in 128 ms batches), and the same binary with
//   `--audio-batch-seconds 0` (each 20 ms message its own job, as before batching): T
//   talkers in real time, 20 ms messages, each to `ended`; the server's CPU and context
//   switches over that time, less what it spends idle over as long.
//
// CPU from /proc/PID/stat (utime + stime, every thread); context switches summed over
// /proc/PID/task/*/status (voluntary: the thread waited, a wake-up; involuntary: preempted).
// Per second of audio (T × the speech's length); the least CPU of the rounds for each row,
// with the context switches of that run.

struct ProcessCounters {
    var cpu = 0.0
    var voluntary = 0
    var involuntary = 0

    init() {}

    init(pid: pid_t) {
        if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
           let close = stat.lastIndex(of: ")") {
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) {
                cpu = (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
            }
        }
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else { continue }
            for line in status.split(separator: "\n") {
                let value = Int(line.split(separator: "\t").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "") ?? 0
                if line.hasPrefix("voluntary_ctxt_switches:") { voluntary += value }
                if line.hasPrefix("nonvoluntary_ctxt_switches:") { involuntary += value }
            }
        }
    }

    static func - (a: ProcessCounters, b: ProcessCounters) -> ProcessCounters {
        var d = ProcessCounters()
        d.cpu = a.cpu - b.cpu
        d.voluntary = a.voluntary - b.voluntary
        d.involuntary = a.involuntary - b.involuntary
        return d
    }

    static func + (a: ProcessCounters, b: ProcessCounters) -> ProcessCounters {
        var d = ProcessCounters()
        d.cpu = a.cpu + b.cpu
        d.voluntary = a.voluntary + b.voluntary
        d.involuntary = a.involuntary + b.involuntary
        return d
    }

    /// `self` less `rate` (per second) over `seconds`.
    func less(_ rate: ProcessCounters, over seconds: Double) -> ProcessCounters {
        var d = self
        d.cpu -= rate.cpu * seconds
        d.voluntary -= Int((Double(rate.voluntary) * seconds).rounded())
        d.involuntary -= Int((Double(rate.involuntary) * seconds).rounded())
        return d
    }
}

private struct WakeupsRow {
    var talkers = 0
    var mode = ""
    /// Counters over the measured work, and the seconds of audio it was.
    var counters = ProcessCounters()
    var audioSeconds = 0.0
    var lagP95 = 0.0
    var finals = 0
    var failed = false

    var cpuPerAudioSecondMs: Double { counters.cpu / audioSeconds * 1000 }
    var voluntaryPerAudioSecond: Double { Double(counters.voluntary) / audioSeconds }
    var involuntaryPerAudioSecond: Double { Double(counters.involuntary) / audioSeconds }
}

func runWakeupsBench(talkerCounts: [Int], rounds: Int, steno: String, speech: [UInt8]) {
    let seconds = Double(speech.count) / 32000
    print("wake-ups benchmark: \(talkerCounts.map(String.init).joined(separator: ", ")) talkers, each \(format(seconds, 1)) s of speech"
        + " in real time (20 ms messages); \(rounds) rounds, interleaved; \(ProcessInfo.processInfo.activeProcessorCount) cores;"
        + " load average \(loadAverage())")
    print("  steno: \(steno)")
    var best: [String: WakeupsRow] = [:]
    func keep(_ row: WakeupsRow) {
        let key = "\(row.talkers) \(row.mode)"
        print("  \(row.mode), \(row.talkers) talkers: CPU \(format(row.cpuPerAudioSecondMs, 1)) ms per audio s, "
            + "\(format(row.voluntaryPerAudioSecond, 1)) voluntary + \(format(row.involuntaryPerAudioSecond, 1)) involuntary "
            + "context switches per audio s" + (row.mode == "floor" ? "" : ", lag p95 \(format(row.lagP95, 2)) s, \(row.finals) finals")
            + (row.failed ? " (FAILED)" : "") + "; load \(loadAverage())")
        guard !row.failed else { return }
        if let old = best[key], old.cpuPerAudioSecondMs <= row.cpuPerAudioSecondMs { return }
        best[key] = row
    }
    let modes = ["floor", "batched", "unbatched"]
    for round in 1...max(1, rounds) {
        print("  round \(round):")
        for mode in modes {
            if mode == "floor" {
                for t in talkerCounts { keep(measureFloorInRealTime(talkers: t, speech: speech)) }
            } else {
                for row in measureServerWakeups(steno: steno, unbatched: mode == "unbatched", talkerCounts: talkerCounts, speech: speech) {
                    keep(row)
                }
            }
        }
    }
    print("")
    print("  talkers  mode        CPU ms/audio s   × floor   voluntary cs/audio s   involuntary cs/audio s   × floor (voluntary)")
    for t in talkerCounts {
        let floor = best["\(t) floor"]
        for mode in modes {
            guard let r = best["\(t) \(mode)"] else { continue }
            let ratio = floor.map { r.cpuPerAudioSecondMs / $0.cpuPerAudioSecondMs } ?? 0
            let csRatio = floor.map { r.voluntaryPerAudioSecond / max(1e-9, $0.voluntaryPerAudioSecond) } ?? 0
            print("  " + [rightAligned("\(t)", 7), rightAligned(mode, 10) + " ", rightAligned(format(r.cpuPerAudioSecondMs, 1), 14),
                          rightAligned(format(ratio, 2) + "×", 9), rightAligned(format(r.voluntaryPerAudioSecond, 1), 22),
                          rightAligned(format(r.involuntaryPerAudioSecond, 1), 24), rightAligned(format(csRatio, 2) + "×", 21)]
                .joined(separator: " "))
        }
    }
    print("")
    print("  floor: pocketsphinx_continuous -infile /dev/stdin with Steno's decoder options, one process per talker,")
    print("  fed raw PCM through a pipe in real time, counted from its model loaded to its audio done. batched: steno")
    print("  serve as it is; unbatched: the same binary with --audio-batch-seconds 0 (a lane job per 20 ms message).")
    print("  The server's counters are over the talk, less its idle rate over as long; least CPU of the rounds.")
}


/// `talkers` pocketsphinx_continuous processes, each fed `speech` in real time through a pipe.
private func measureFloorInRealTime(talkers: Int, speech: [UInt8]) -> WakeupsRow {
    var row = WakeupsRow()
    row.talkers = talkers
    row.mode = "floor"
    row.audioSeconds = Double(speech.count) / 32000 * Double(talkers)
    guard let engines = EngineProcesses(count: talkers) else {
        row.failed = true
        return row
    }
    row.counters = engines.feed((0..<talkers).map { _ in EngineStream(delay: 0, pcm: speech) }, from: monotonicSeconds() + 0.1)
    return row
}

/// What one engine process is fed: raw 16 kHz PCM, from `delay` seconds after the first.
struct EngineStream {
    var delay: Double
    var pcm: [UInt8]
}

/// The engine fed in real time, the floor of live recognition: `count` `pocketsphinx_continuous
/// -infile /dev/stdin` with Steno's decoder options, their models loaded and waiting on their
/// pipes, made before a measured stretch so that it can start them at a given moment (alongside
/// a server fed the same streams at the same time, say). `feed` writes each its stream 20 ms at
/// a time in real time and returns the processes' counters (all threads, summed) over it.
final class EngineProcesses: @unchecked Sendable {
    private let processes: [Child]

    init?(count: Int) {
        // The server's own decoder options, so the floor follows Steno's default.
        let args = ["-infile", "/dev/stdin", "-logfn", "/dev/null"] + PocketSphinxConfiguration().decoderArguments
        var processes: [Child] = []
        for _ in 0..<count {
            guard let child = Child.spawn("/usr/bin/pocketsphinx_continuous", args, stdout: false, stdin: true) else {
                processes.forEach { $0.terminate(SIGKILL) }
                return nil
            }
            processes.append(child)
        }
        self.processes = processes
        // Loaded: each has used no CPU for half a second (it reads its input only after that).
        for process in processes { Self.waitUntilIdle(process, atMost: 30) }
    }

    /// Each process its stream from `began` + its delay, in real time; when all have finished,
    /// their counters over it, and they exit.
    func feed(_ streams: [EngineStream], from began: Double) -> ProcessCounters {
        let before = processes.map { ProcessCounters(pid: $0.pid) }
        let threads = zip(processes, streams).map { process, stream in
            Thread {
                guard let fd = process.stdinFD else { return }
                let start = began + stream.delay
                let wait = start - monotonicSeconds()
                if wait > 0 { usleep(useconds_t(wait * 1_000_000)) }
                let speech = stream.pcm
                var offset = 0, index = 0
                while offset < speech.count {
                    let end = min(speech.count, offset + 640)
                    speech[offset..<end].withUnsafeBytes { bytes in
                        var done = 0
                        while done < bytes.count {
                            let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
                            if n <= 0 { return }
                            done += n
                        }
                    }
                    offset = end
                    index += 1
                    let wait = start + Double(index) * 0.02 - monotonicSeconds()
                    if wait > 0 { usleep(useconds_t(wait * 1_000_000)) }
                }
            }
        }
        threads.forEach { $0.start() }
        while !threads.allSatisfy(\.isFinished) { usleep(20_000) }
        // Its last block and utterance: done once it has been quiet for half a second.
        for process in processes { Self.waitUntilIdle(process, atMost: .infinity) }
        // Quiet means blocked in read: the idle half second adds nothing to the counters.
        let after = processes.map { ProcessCounters(pid: $0.pid) }
        for process in processes {
            // The end of its input: it finishes and exits.
            if let fd = process.stdinFD { close(fd) }
            process.waitForExit()
        }
        return zip(after, before).map { $0 - $1 }.reduce(ProcessCounters(), +)
    }

    /// Until `process` has used no CPU for two quarter-seconds in a row.
    private static func waitUntilIdle(_ process: Child, atMost seconds: Double) {
        var last = ProcessCounters(pid: process.pid).cpu
        var quiet = 0
        let began = monotonicSeconds()
        while quiet < 2 && monotonicSeconds() - began < seconds {
            usleep(250_000)
            let now = ProcessCounters(pid: process.pid).cpu
            quiet = now - last < 0.005 ? quiet + 1 : 0
            last = now
        }
    }
}

/// One `steno serve` (batched as it is, or with each message its own job), and for each count
/// of talkers, that many talking at once.
private func measureServerWakeups(steno: String, unbatched: Bool, talkerCounts: [Int], speech: [UInt8]) -> [WakeupsRow] {
    let mode = unbatched ? "unbatched" : "batched"
    let server = Child.spawn(steno, ["serve", "--engine", "pocketsphinx", "--port", "0", "--idle-timeout", "0", "--log-level", "warning",
                                     "--web-root", "/nonexistent"] + (unbatched ? ["--audio-batch-seconds", "0"] : []), stdout: true)
    guard let server, let port = server.readPort() else {
        print("  \(mode): the server did not start")
        return []
    }
    defer { server.terminate() }
    // Its shared decoders made, then what it spends doing nothing.
    _ = waitUntilQuiet(server)
    let idleStart = (ProcessCounters(pid: server.pid), monotonicSeconds())
    usleep(5_000_000)
    let idleSpan = monotonicSeconds() - idleStart.1
    var idle = ProcessCounters(pid: server.pid) - idleStart.0
    idle.cpu /= idleSpan
    idle.voluntary = Int((Double(idle.voluntary) / idleSpan).rounded())
    idle.involuntary = Int((Double(idle.involuntary) / idleSpan).rounded())
    var rows: [WakeupsRow] = []
    for t in talkerCounts {
        var row = WakeupsRow()
        row.talkers = t
        row.mode = mode
        row.audioSeconds = Double(speech.count) / 32000 * Double(t)
        let before = ProcessCounters(pid: server.pid)
        let began = monotonicSeconds()
        let done = runTalkers(t, port: port, pcm: speech)
        let span = monotonicSeconds() - began
        row.counters = (ProcessCounters(pid: server.pid) - before).less(idle, over: span)
        row.failed = done.contains { $0.failure != nil }
        let lags = done.flatMap(\.lags).sorted()
        row.lagP95 = lags.isEmpty ? 0 : lags[min(lags.count - 1, Int(Double(lags.count) * 0.95))]
        row.finals = done.map { $0.finalLatencies.count + $0.finalsAtEnd }.reduce(0, +)
        rows.append(row)
        _ = waitUntilQuiet(server)
    }
    return rows
}

/// `seconds` of 16 kHz PCM white noise whose RMS is `dBFS` (a quiet room's hiss), seeded.
func noisePCM(seconds: Double, dBFS: Double) -> [UInt8] {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    let rms = pow(10, dBFS / 20) * 32768
    var out: [UInt8] = []
    for _ in 0..<Int(seconds * 16000) {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        // Uniform in [-1, 1) has an RMS of 1/sqrt(3).
        let uniform = Double(Int64(bitPattern: state) >> 11) / Double(1 << 52)
        let sample = Int16(clamping: Int((uniform * rms * 3.0.squareRoot()).rounded()))
        out.append(UInt8(truncatingIfNeeded: sample))
        out.append(UInt8(truncatingIfNeeded: sample >> 8))
    }
    return out
}
