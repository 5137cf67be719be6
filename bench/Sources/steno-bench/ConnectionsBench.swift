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
