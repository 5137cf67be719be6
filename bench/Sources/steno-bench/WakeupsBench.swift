// steno-bench connections --wakeups: the server's CPU and wake-ups per audio second for a few live talkers, batched and not, against the engine fed in real time (ConnectionsBench.swift).
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
