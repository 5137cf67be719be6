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
//   steno-bench server [--sessions 1,2,4] [--repeat 3] [--designs shared,dedicated] [--steno .build/release/steno]
//                      [--fast] FILE.wav…
//
// CPU time on these machines swings by ±30 % from run to run, so each row is measured
// `--repeat` times, interleaved with a run of the floor, and the least CPU of each is kept.
// Designs, each row interleaved with the others: `shared` (the default server: a pool of
// `--recognizers` decoders lent per utterance), `dedicated` (`steno-bench dedicated-server
// --recognizers N`: a decoder per session, the old design, in a server of the bench's own),
// and `unwarmed` (shared, measured without waiting for the pool to be made: what this bench
// did before, kept to show the cost).
//
// Default audio: the five LibriVox sentences of the speech tests, one after the other (24.7 s).

func runServerBench(_ arguments: [String]) {
    var sessionCounts = [1, 2, 4]
    var steno = ".build/release/steno"
    var files: [String] = []
    var realTime = true
    var repeats = 3
    var designs: [ServerDesign] = [.shared, .dedicated]
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
        case "--designs":
            index += 1
            designs = arguments[safe: index]?.split(separator: ",").compactMap { ServerDesign(rawValue: String($0)) } ?? designs
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
    var rows: [(Int, ServerDesign, ServerRow)] = []
    for n in sessionCounts {
        var best: [ServerDesign: ServerRow] = [:]
        for _ in 0..<repeats {
            let f = measureFloor(wavPath: wavPath, duration: duration, loading: loading)
            floor = Floor(cpuPerAudioSecond: min(floor.cpuPerAudioSecond, f.cpuPerAudioSecond),
                          peakRSSMB: max(floor.peakRSSMB, f.peakRSSMB))
            for design in designs {
                guard let row = measureServer(steno: steno, design: design, sessions: n, pcm: pcm, duration: duration,
                                              realTime: realTime) else { continue }
                if best[design].map({ row.cpuSeconds < $0.cpuSeconds }) ?? true { best[design] = row }
            }
        }
        for design in designs {
            if let row = best[design] { rows.append((n, design, row)) } else { print("  \(n) sessions, \(design): failed") }
        }
    }

    print("  floor: pocketsphinx_continuous -infile (same decoder options), "
        + "\(format(floor.cpuPerAudioSecond * 1000, 0)) ms CPU per audio s, peak RSS \(format(floor.peakRSSMB, 0)) MB")
    print("")
    print("  sessions   design      lag mean   lag p95   lag max   end→ended   CPU ms/audio s   ×floor   RSS MB   RSS/session   finals   pool made in")
    for (n, design, row) in rows {
        let cpu = row.cpuSeconds / (duration * Double(n))
        print("  " + [rightAligned("\(n)", 8), rightAligned(design.rawValue, 11), rightAligned(format(row.lagMean, 3) + " s", 10), rightAligned(format(row.lagP95, 3) + " s", 9),
                      rightAligned(format(row.lagMax, 3) + " s", 9), rightAligned(format(row.endLatencyMean, 3) + " s", 11),
                      rightAligned(format(cpu * 1000, 0), 16), rightAligned(format(cpu / floor.cpuPerAudioSecond, 2) + "×", 8),
                      rightAligned(format(row.rssMB, 0), 8), rightAligned(format(row.rssMB / Double(n), 0), 13),
                      rightAligned("\(row.finals)", 8), rightAligned(row.poolMadeIn.map { format($0, 1) + " s" } ?? "—", 12)].joined(separator: " "))
    }
    print("")
    print("  lag: received − analyzed in each progress event, all sessions; end→ended: from sending end to")
    print("  receiving ended, mean over sessions; CPU: the server process's user+system time during the")
    print("  measured round ÷ audio seconds analyzed; RSS: the server's resident memory after the round")
    print("  (every session's recognizer is still pooled). Before the measured round the bench waits until")
    print("  /metrics says every shared decoder is made (pool made in: from the port's announcement; not")
    print("  for `unwarmed`), then a warm-up round of 2 s of audio per session, sent fast.")
}

// MARK: - The floor

private struct Floor {
    var cpuPerAudioSecond: Double
    var peakRSSMB: Double
}

/// One `pocketsphinx_continuous -infile` run with Steno's decoder options: CPU seconds, peak RSS.
/// The options are the server's own (`decoderArguments`), so the floor follows the default.
private func runFloor(_ file: String) -> (cpu: Double, rss: Double) {
    let args = ["-infile", file, "-logfn", "/dev/null"] + PocketSphinxConfiguration().decoderArguments
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

private enum ServerDesign: String {
    case shared, dedicated, unwarmed
}

private struct ServerRow {
    var lagMean = 0.0, lagP95 = 0.0, lagMax = 0.0
    var endLatencyMean = 0.0
    var cpuSeconds = 0.0
    var rssMB = 0.0
    var finals = 0
    /// How long after the port was announced every shared decoder existed.
    var poolMadeIn: Double?
}

private func measureServer(steno: String, design: ServerDesign, sessions n: Int, pcm: [UInt8], duration: Double,
                           realTime: Bool) -> ServerRow? {
    // The old design, a decoder per session, is a server of the bench's own (BenchServers.swift).
    let server = design == .dedicated
        ? Child.spawn(benchExecutable, ["dedicated-server", "--max-sessions", "\(n)", "--recognizers", "\(n)"], stdout: true)
        : Child.spawn(steno, ["serve", "--engine", "pocketsphinx", "--port", "0", "--max-sessions", "\(n)", "--idle-timeout", "0",
                              "--log-level", "warning", "--web-root", "/nonexistent"], stdout: true)
    guard let server, let port = server.readPort() else { return nil }
    defer { server.terminate() }

    // The shared decoders are made in the background after the server listens (≈0.5 s of CPU
    // each): a round measured meanwhile shares the cores with them.
    var row = ServerRow()
    if design != .unwarmed {
        guard let madeIn = waitForRecognizers(port: port) else { return nil }
        row.poolMadeIn = madeIn
    }
    // Warm-up: a first utterance of each session (caches, the lanes, the decoders' first use).
    _ = runSessions(port: port, count: n, pcm: Array(pcm.prefix(32000 * 2)), realTime: false)

    let cpuBefore = server.cpuSeconds()
    let results = runSessions(port: port, count: n, pcm: pcm, realTime: realTime)
    let cpuAfter = server.cpuSeconds()
    guard results.count == n else { return nil }

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
    /// How long after the port was announced every shared decoder existed.
    var poolMadeIn: Double?
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
        var result = SessionResult()
        let record = try streamSession(
            ws, start: #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#,
            frames: pcmFrames(pcm), realTime: realTime
        ) { type, event, _, _ in
            switch type {
            case "progress":
                if case .number(let received)? = event["received"], case .number(let analyzed)? = event["analyzed"] {
                    result.lags.append(received - analyzed)
                }
            case "final": result.finals += 1
            default: break
            }
        }
        result.endLatency = record.endedAt - record.endSentAt
        return result
    } catch {
        print("  session failed: \(error)")
        return nil
    }
}

// MARK: - Processes




extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
