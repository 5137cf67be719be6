import Foundation
import StenoAudio
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// steno-bench capacity (issue 15's benchmark): N sessions of real speech with pauses (about
// half speech), each on its own WebSocket connection to a `steno serve` child (release build),
// in real time (20 ms messages), started one by one `--stagger` seconds apart so that
// admission can measure each new talker before the next comes, all streaming together for
// `--seconds` after the last has started. For each N and each design (the shared recognizer
// pool, and the old decoder per session: `--dedicated-recognizers --recognizers N`):
//
// - lag p50/p95: received − analyzed in the `progress` events read while every admitted
//   session was streaming, for `--seconds` from the last one's start;
// - final latency p50/p95: from sending an utterance's last audio to receiving the final
//   that completes it (finals that `end` made are left out);
// - the server's CPU per second of audio (silence included) and its resident memory, per
//   admitted session over what it holds with none;
// - WER of every admitted session's finals against the references of what it said;
// - refusals: handshakes answered 503 (with the body's reason and Retry-After), and the
//   refusals /metrics counted by reason.
//
// Next to them: the compute bound cores ÷ (speech fraction × engine RTF), the RTF being
// `pocketsphinx_continuous` with Steno's decoder options fed the same speech through a pipe in
// real time, measured in the same run, before the rounds and after them (the mean of the two). `--svg PATH` draws lag p95 against N for both designs.
//
//   steno-bench capacity [--counts 2,4,6,8,10,12,14,16] [--seconds 30] [--stagger 1.5]
//                        [--designs shared,dedicated] [--rtf-seconds 40] [--svg bench/capacity.svg]
//                        [--steno .build/release/steno] [--no-admission] [--admit-utilization F]
//                        [--endpointing MODE] [--recognizers N] [--spare-recognizers N]
//                        [--client epoll|threads] [--floor-counts 4]
//
// `--floor-counts 4,8` (default none): in the rounds of those N, the engine is fed the very same
// streams (speech and pauses, the same ramp) at the same time as the server, in real time: one
// `pocketsphinx_continuous` per session through a pipe (``EngineProcesses``), the floor issue 15
// names. Its CPU per audio second against the server's, measured over the same seconds, is the
// fair ratio: on these shared machines the CPU's speed moves by ±20 % from one minute to the
// next, so a floor measured before or after a round compares different machines; and the
// compute bound's RTF is measured on speech alone, which leaves out what the engine does in the
// pauses (the front end on the faint noise, the end of each utterance). The floor takes cores
// too: those rounds' lags are not the capacity's.
//
// `--client epoll` (the default) drives every session of a round from one client thread with
// non-blocking sockets and epoll (EpollTalkers.swift); `--client threads` gives each session a
// thread of its own (``streamSession``), as before. On 2 cores, 16–32 client threads took CPU
// from the server's workers (their busy ÷ CPU time rose to 1.2–1.4), so the round measured
// server and clients together. Each round prints the workers' busy ÷ CPU time and the client
// threads' own CPU seconds over the round, to see that the clients stay cheap.
//
// `--no-admission` serves with `--lag-target 0` (no load admission): every session is
// admitted, so past the bound the round shows overload itself, and whether its lag stays even
// across the sessions (the p95 per session) and their finals in order. `--admit-utilization F`
// passes that option to the server (default: the server's own), to compare targets;
// `--endpointing MODE` likewise (`detector`, `search`: when finals come, see `steno serve --help`),
// and `--recognizers N` (the shared design's decoders; default: the server's own), and
// `--spare-recognizers N` (N decoders made ahead, the rest as speech needs them; default: the
// server's, all of them at start).
//
// Speech: the five LibriVox sentences and the five card names of Tests/StenoSpeechTests/Resources
// and the twelve synthetic sentences of bench/phrases/tts, with their references, taken in
// turn (each session from another place in the list), each followed by a pause about as long
// as itself (at least 1 s) of faint noise. Run from the package root.

func runCapacityBench(_ arguments: [String]) {
    var counts = [2, 4, 6, 8, 10, 12, 14, 16]
    var seconds = 30.0
    var stagger = 1.5
    var rtfSeconds = 40.0
    var designs: [CapacityDesign] = [.shared, .dedicated]
    var svgPath: String?
    var steno = ".build/release/steno"
    var admission = true
    // Options given to every server as they are (--admit-utilization, --endpointing, --recognizers,
    // --spare-recognizers).
    var serveOptions: [String] = []
    var client = CapacityClient.epoll
    var floorCounts: [Int] = []
    var index = 0
    while index < arguments.count {
        let value = arguments[safe: index + 1]
        switch arguments[index] {
        case "--counts": counts = value?.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 } ?? counts
        case "--seconds": seconds = value.flatMap(Double.init) ?? seconds
        case "--stagger": stagger = value.flatMap(Double.init) ?? stagger
        case "--rtf-seconds": rtfSeconds = value.flatMap(Double.init) ?? rtfSeconds
        case "--designs": designs = value?.split(separator: ",").compactMap { CapacityDesign(rawValue: String($0)) } ?? designs
        case "--svg": svgPath = value
        case "--floor-counts": floorCounts = value?.split(separator: ",").compactMap { Int($0) } ?? floorCounts
        case "--steno": steno = value ?? steno
        case "--client":
            guard let chosen = value.flatMap(CapacityClient.init(rawValue:)) else {
                print("capacity benchmark: --client epoll or --client threads")
                return
            }
            client = chosen
        case "--admit-utilization", "--endpointing", "--recognizers", "--spare-recognizers": serveOptions += [arguments[index], value ?? ""]
        case "--no-admission":
            admission = false
            index += 1
            continue
        default:
            print("capacity benchmark: unknown option \(arguments[index])")
            return
        }
        index += 2
    }
    guard FileManager.default.isExecutableFile(atPath: steno) else {
        print("capacity benchmark: no steno binary at \(steno) (swift build -c release --product steno)")
        return
    }
    let speech: [SpokenUtterance]
    do { speech = try loadSpokenUtterances() } catch {
        print("capacity benchmark: \(error)")
        return
    }
    let cores = ProcessInfo.processInfo.activeProcessorCount
    print("capacity benchmark: \(speech.count) utterances with references (\(format(speech.map(\.seconds).reduce(0, +), 1)) s), "
        + "each session \(format(seconds, 0)) s together after a ramp of \(format(stagger, 1)) s per session, real time, 20 ms PCM messages")
    print("  steno: \(steno), \(cores) cores, load average \(loadAverage()) at the start, client: "
        + (client == .epoll ? "one thread (epoll)" : "a thread per session") + (admission ? "" : "; no load admission (--lag-target 0)")
        + (serveOptions.isEmpty ? "" : "; " + serveOptions.joined(separator: " ")))
    print("")

    // The engine's own cost on this speech, in this run.
    let rtf = measureEngineRTF(speech: speech, seconds: rtfSeconds)
    if let rtf {
        print("  engine: pocketsphinx_continuous (Steno's decoder options) fed \(format(rtf.audioSeconds, 1)) s of the speech "
            + "through a pipe in real time: RTF \(format(rtf.value, 3)) (model loading of \(format(rtf.loading, 2)) s CPU left out)")
    } else {
        print("  engine: pocketsphinx_continuous could not be run; no compute bound")
    }

    var rows: [CapacityRow] = []
    for n in counts {
        let plans = (0..<n).map { SessionPlan(session: $0, of: n, speech: speech, seconds: seconds, stagger: stagger) }
        for design in designs {
            guard let row = measureCapacity(steno: steno, design: design, plans: plans, seconds: seconds,
                                            admission: admission, serveOptions: serveOptions, client: client,
                                            floor: floorCounts.contains(n)) else {
                print("  \(n) sessions, \(design.rawValue): the server could not be run")
                continue
            }
            rows.append(row)
            print("  " + row.line)
        }
    }
    // The speech fraction of everything the admitted sessions sent (utterance files over all
    // audio: the files' own short silences at their ends count as speech).
    let sent = rows.reduce((speech: 0.0, audio: 0.0)) { ($0.speech + $1.speechSeconds, $0.audio + $1.audioSeconds) }
    let fraction = sent.audio > 0 ? sent.speech / sent.audio
        : SessionPlan(session: 0, of: 1, speech: speech, seconds: seconds, stagger: 0).speechFraction
    // Again after the rounds: on a shared host the CPU's speed drifts over a run (RTF 0.14 to
    // 0.19 within an hour here), and a bound from the start alone would judge late rounds by
    // an early machine. The bound is taken at the mean of the two.
    let rtfAfter = rtf == nil ? nil : measureEngineRTF(speech: speech, seconds: rtfSeconds)
    let rtfMean = rtf.map { first in rtfAfter.map { (first.value + $0.value) / 2 } ?? first.value }
    let bound = rtfMean.map { Double(cores) / (fraction * $0) }

    print("")
    print("  N   design      admitted  refused (why)              lag p50  lag p95  p95 per session  final p50  final p95  CPU ms/audio s  RSS MB  MB/session  WER               busy÷CPU  client CPU")
    for row in rows { print("  " + row.line) }
    print("")
    if rows.contains(where: { $0.floorCPUPerAudioSecond != nil }) {
        print("  CPU against the engine fed the same streams at the same time, in real time (the floor; --floor-counts):")
        for row in rows {
            guard let floor = row.floorCPUPerAudioSecond else { continue }
            print("    \(row.sessions) \(row.design.rawValue): \(format(row.cpuPerAudioSecond * 1000, 1)) ms per audio s against "
                + "\(format(floor * 1000, 1)) ms: \(format(row.cpuPerAudioSecond / floor, 2))×"
                + (row.refused > 0 ? " (\(row.refused) refused: their attempts are in the server's CPU)" : ""))
        }
        print("")
    }
    print("  admission (sampled every 2 s from /metrics):")
    for row in rows { print("    " + row.admissionLine) }
    print("")
    for design in designs {
        let mine = rows.filter { $0.design == design }
        let within = mine.filter { $0.refused == 0 && $0.lagP95 < 1 }.map(\.sessions).max()
        let admitted = mine.map(\.admitted).max() ?? 0
        // With admission holding the line, a round past capacity admits fewer than it offered:
        // the most admitted in a round still within 1 s is what the machine serves.
        let held = mine.filter { $0.lagP95 < 1 }.map(\.admitted).max()
        var text = "  \(design.rawValue): largest N served whole with lag p95 < 1 s: \(within.map(String.init) ?? "none")"
        if let bound, let within { text += " (\(format(Double(within) / bound, 2)) of the compute bound)" }
        text += "; most admitted in a round within 1 s: \(held.map(String.init) ?? "none")"
        if let bound, let held { text += " (\(format(Double(held) / bound, 2)) of the bound)" }
        text += "; most sessions admitted at once: \(admitted)"
        let overloaded = mine.filter { $0.refused > 0 && $0.lagP95 >= 1 }.map { "\($0.sessions)" }
        if !overloaded.isEmpty { text += "; refused some and still over 1 s at N = " + overloaded.joined(separator: ", ") }
        print(text)
    }
    if let bound, let rtf, let rtfMean {
        print("  compute bound: \(cores) cores ÷ (speech fraction \(format(fraction, 2)) × RTF \(format(rtfMean, 3))) = \(format(bound, 1)) sessions"
            + " (RTF \(format(rtf.value, 3)) before the rounds, " + (rtfAfter.map { format($0.value, 3) } ?? "not measured") + " after)")
    }
    print("  load average at the end: \(loadAverage())")
    print("")
    print("  lag: received − analyzed of the progress events read while every admitted session streamed, for --seconds (p95 per")
    print("  session: the lowest and highest of each session's own p95, for fairness); final: from")
    print("  sending an utterance's last audio to the final that completes it (finals made by end left out); CPU: the")
    print("  server's user+system time over the round ÷ audio seconds sent (pauses included); MB/session: resident")
    print("  memory with all admitted sessions streaming minus before the first, ÷ admitted; WER: raw finals against")
    print("  the references, all admitted sessions; refused: 503 at the handshake (reason from its body and /metrics);")
    print("  busy÷CPU: the server's workers' wall-clock over CPU time in their jobs (over 1: they waited for a core);")
    print("  client CPU: the CPU seconds of the bench's client thread(s) over the round (--client \(client.rawValue)).")

    if let svgPath {
        let svg = capacitySVG(rows: rows, designs: designs, bound: bound, cores: cores)
        if (try? svg.write(toFile: svgPath, atomically: true, encoding: .utf8)) != nil {
            print("  plot: \(svgPath)")
        } else {
            print("  cannot write \(svgPath)")
        }
    }
}

private enum CapacityDesign: String {
    case shared, dedicated
}

/// How the sessions of a round are driven: all from one thread (epoll), or a thread each.
private enum CapacityClient: String {
    case epoll, threads
}

// MARK: - The speech

private struct SpokenUtterance {
    var name: String
    var samples: [Int16]
    var reference: [String]
    var seconds: Double { Double(samples.count) / 16000 }
}

/// The utterances with references, sets taken in turn (LibriVox, cards, synthetic, LibriVox…)
/// so that any stretch of the list has some of each.
private func loadSpokenUtterances() throws -> [SpokenUtterance] {
    let sets = [("Tests/StenoSpeechTests/Resources/librivox", "transcription"),
                ("Tests/StenoSpeechTests/Resources/cards", "cards.transcription"),
                ("bench/phrases/tts", "transcription")]
    var lists: [[SpokenUtterance]] = []
    for (folder, file) in sets {
        guard let text = try? String(contentsOfFile: "\(folder)/\(file)", encoding: .utf8) else {
            throw TalkerError("no references at \(folder)/\(file) (run from the package root)")
        }
        var list: [SpokenUtterance] = []
        // `<s> words </s> (name)`, one utterance a line.
        for line in text.split(separator: "\n") {
            guard let open = line.lastIndex(of: "("), let close = line.lastIndex(of: ")"), open < close else { continue }
            let name = String(line[line.index(after: open)..<close])
            let words = normalizedWords(String(line[..<open]))
            let wav: WAVFile
            do throws(StenoError) { wav = try WAVFile(path: "\(folder)/\(name).wav") } catch {
                throw TalkerError("\(folder)/\(name).wav: \(error.message)")
            }
            guard wav.sampleRate == 16000 else { throw TalkerError("\(folder)/\(name).wav is not 16 kHz") }
            let samples = wav.mono.map { Int16(max(-32768, min(32767, ($0 * 32768).rounded()))) }
            list.append(SpokenUtterance(name: name, samples: samples, reference: words))
        }
        lists.append(list)
    }
    var merged: [SpokenUtterance] = []
    for i in 0..<(lists.map(\.count).max() ?? 0) {
        for list in lists where i < list.count { merged.append(list[i]) }
    }
    return merged
}

/// Lowercase words without pocketsphinx's markers or punctuation.
private func normalizedWords(_ text: String) -> [String] {
    text.lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" })
        .filter { $0 != "<s>" && $0 != "</s>" && $0 != "<sil>" }
        .map { String($0.filter { $0.isLetter || $0.isNumber || $0 == "'" }) }
        .filter { !$0.isEmpty }
}

/// What one session says: its audio (speech and pauses) and where each utterance lies on
/// its timeline. Deterministic for (session, count): both designs get the same audio.
private struct SessionPlan {
    struct Spoken {
        var start: Double
        var end: Double
        var reference: [String]
    }

    var session: Int
    /// When it connects, after the first session (seconds).
    var delay: Double
    var frames: [[UInt8]]
    var spoken: [Spoken]
    var audioSeconds: Double
    var speechSeconds: Double
    var speechFraction: Double { speechSeconds / max(audioSeconds, 1e-9) }

    /// Session `k` of `n` connects `k × stagger` seconds after the first and streams until
    /// about `seconds` after the last one connected, so that all stream together for that long.
    init(session k: Int, of n: Int, speech: [SpokenUtterance], seconds: Double, stagger: Double) {
        session = k
        delay = Double(k) * stagger
        var random = SplitMix(seed: UInt64(k) &* 0x9E37_79B9 &+ 17)
        let length = seconds + Double(n - 1 - k) * stagger
        var samples: [Int16] = []
        func pause(_ duration: Double) {
            // Faint noise (±4 of 32768, about −80 dBFS): a quiet room, not digital zeros.
            for _ in 0..<Int(duration * 16000) { samples.append(Int16(Int(random.next() % 9) - 4)) }
        }
        pause(0.3 + random.unit() * 1.2)
        var spoken: [Spoken] = []
        var speechSamples = 0
        var next = (k * 7) % speech.count
        while Double(samples.count) / 16000 < length {
            let utterance = speech[next]
            next = (next + 1) % speech.count
            let start = Double(samples.count) / 16000
            samples += utterance.samples
            speechSamples += utterance.samples.count
            spoken.append(Spoken(start: start, end: Double(samples.count) / 16000, reference: utterance.reference))
            pause(max(1, utterance.seconds * (0.6 + 0.8 * random.unit())))
        }
        var pcm = [UInt8]()
        pcm.reserveCapacity(samples.count * 2)
        for sample in samples {
            let bits = UInt16(bitPattern: sample)
            pcm.append(UInt8(bits & 0xff))
            pcm.append(UInt8(bits >> 8))
        }
        frames = pcmFrames(pcm)
        self.spoken = spoken
        audioSeconds = Double(samples.count) / 16000
        speechSeconds = Double(speechSamples) / 16000
    }
}

// MARK: - The engine's RTF

private struct EngineRTF {
    var value: Double
    var audioSeconds: Double
    var loading: Double
}

/// `pocketsphinx_continuous` with Steno's decoder options reading raw 16 kHz PCM from a pipe,
/// written in 20 ms pieces at real time (as a live source would; read from a file as fast as
/// possible it costs 20–30 % less): the utterances back to back, about `seconds` of them. CPU
/// per audio second, its model loading (the least of three runs on 0.1 s) taken out.
private func measureEngineRTF(speech: [SpokenUtterance], seconds: Double) -> EngineRTF? {
    var samples: [Int16] = []
    for utterance in speech where Double(samples.count) / 16000 < seconds { samples += utterance.samples }
    let pcm = samples.flatMap { sample -> [UInt8] in
        let bits = UInt16(bitPattern: sample)
        return [UInt8(bits & 0xff), UInt8(bits >> 8)]
    }
    let loading = (0..<3).compactMap { _ in runPipedCLI(pcm: [UInt8](repeating: 0, count: 3200), realTime: false) }.min()
    guard let loading, let cpu = runPipedCLI(pcm: pcm, realTime: true) else { return nil }
    let audio = Double(samples.count) / 16000
    return EngineRTF(value: max(0, cpu - loading) / audio, audioSeconds: audio, loading: loading)
}

/// One run of the CLI on `pcm` through its standard input: its CPU seconds, or nil.
private func runPipedCLI(pcm: [UInt8], realTime: Bool) -> Double? {
    let arguments = ["-infile", "/dev/stdin", "-logfn", "/dev/null"] + PocketSphinxConfiguration().decoderArguments
    guard let child = Child.spawn("/usr/bin/pocketsphinx_continuous", arguments, stdout: true, stdin: true),
          let input = child.stdinFD else { return nil }
    let feeder = Thread {
        let start = monotonicSeconds()
        var offset = 0
        var index = 0
        while offset < pcm.count {
            let end = realTime ? min(pcm.count, offset + 640) : pcm.count
            let written = pcm[offset..<end].withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
            if written <= 0 { break }
            offset += written
            index += 1
            if realTime {
                let wait = start + Double(index) * 0.02 - monotonicSeconds()
                if wait > 0 { usleep(UInt32(wait * 1e6)) }
            }
        }
        close(input)
    }
    feeder.start()
    _ = child.readAllStdout()
    let usage = child.waitWithUsage()
    if let fd = child.stdoutFD { close(fd) }
    while !feeder.isFinished { usleep(1000) }
    return usage.cpu
}

// MARK: - One round

private struct CapacityRow {
    var sessions: Int
    var design: CapacityDesign
    var admitted = 0
    var refused = 0
    var refusalText = ""
    var failed = 0
    var lagP50 = 0.0, lagP95 = 0.0
    /// Fairness: the lowest and highest of the admitted sessions' own lag p95.
    var sessionLagP95Low = 0.0, sessionLagP95High = 0.0
    /// Sessions whose finals did not come in timeline order, or overlapped.
    var finalsOutOfOrder = 0
    /// Admission: the highest projected utilization seen (`steno_admission_utilization`), the
    /// talker demand then, and the workers' busy ÷ CPU seconds (over 1: they waited for cores).
    var peakUtilization = 0.0, talkerDemandAtPeak = 0.0, busyOverCPU = 0.0
    /// What admission had measured by the end of the round: a talker's demand, its cost per
    /// second of speech and its share of time speaking.
    var talkerDemandAtEnd = 0.0, speechCost = 0.0, speechFraction = 0.0
    var finalP50 = 0.0, finalP95 = 0.0
    var finalsTimed = 0
    var cpuPerAudioSecond = 0.0
    var rssMB = 0.0
    var rssPerSessionMB = 0.0
    var wordErrors = 0, referenceWords = 0
    var audioSeconds = 0.0
    var speechSeconds = 0.0
    /// CPU seconds of the client thread(s) over the round.
    var clientCPU = 0.0
    /// The engine fed the same streams alongside (`--floor-counts`): its CPU per audio second.
    var floorCPUPerAudioSecond: Double?

    var wer: Double { referenceWords > 0 ? Double(wordErrors) / Double(referenceWords) : 0 }

    var line: String {
        [rightAligned("\(sessions)", 2), pad(design.rawValue, 10), rightAligned("\(admitted)", 9),
         pad("  \(refused)\(refusalText.isEmpty ? "" : " (\(refusalText))")" + (failed > 0 ? ", \(failed) failed" : ""), 27),
         rightAligned(format(lagP50, 2) + " s", 7), rightAligned(format(lagP95, 2) + " s", 8),
         rightAligned(format(sessionLagP95Low, 2) + "–" + format(sessionLagP95High, 2) + " s", 13),
         rightAligned(format(finalP50, 2) + " s", 9), rightAligned(format(finalP95, 2) + " s", 10),
         rightAligned(format(cpuPerAudioSecond * 1000, 0), 15), rightAligned(format(rssMB, 0), 7), rightAligned(format(rssPerSessionMB, 1), 11),
         pad(rightAligned(format(wer * 100, 1) + " % (\(wordErrors)/\(referenceWords))", 16), 18),
         rightAligned(format(busyOverCPU, 2), 8), rightAligned(format(clientCPU, 2) + " s", 11)].joined(separator: " ")
            + (finalsOutOfOrder > 0 ? "  finals out of order in \(finalsOutOfOrder) sessions" : "")
    }

    var admissionLine: String {
        "\(sessions) \(design.rawValue): projected utilization at most \(format(peakUtilization, 2)) (a talker then "
            + "\(format(talkerDemandAtPeak, 3)) of a worker); at the end a talker \(format(talkerDemandAtEnd, 3)) = "
            + "\(format(speechCost, 3)) per speech second × \(format(speechFraction, 2)) speech; workers' busy ÷ CPU time \(format(busyOverCPU, 2))"
    }
}

private enum SessionOutcome {
    case refused(status: Int, reason: String, retryAfter: String?)
    case failed(String)
    case streamed(StreamedSession, progress: [(at: Double, lag: Double)], finals: [(at: Double, start: Double, end: Double, text: String)])
}

private func measureCapacity(steno: String, design: CapacityDesign, plans: [SessionPlan], seconds: Double,
                             admission: Bool, serveOptions: [String], client: CapacityClient, floor: Bool) -> CapacityRow? {
    let n = plans.count
    var arguments = ["serve", "--engine", "pocketsphinx", "--port", "0", "--idle-timeout", "0", "--log-level", "warning", "--web-root", "/nonexistent"]
    if !admission { arguments += ["--lag-target", "0"] }
    // After the options given: the old design's decoder per session is its own count.
    arguments += serveOptions
    if design == .dedicated { arguments += ["--dedicated-recognizers", "--recognizers", "\(n)"] }
    guard let server = Child.spawn(steno, arguments, stdout: true), let port = server.readPort() else { return nil }
    defer { server.terminate(SIGKILL) }
    // With `--spare-recognizers`, that many are made at start, the rest as speech needs them.
    let spares = serveOptions.firstIndex(of: "--spare-recognizers").flatMap { Int(serveOptions[$0 + 1]) }
    guard waitForRecognizers(port: port, spares: spares) != nil else { return nil }
    // A first short session, so that no measured one pays for first use (caches, a decoder's
    // first search); then the memory with no session.
    if let ws = try? WebSocketTestClient.connect(port: port, timeout: 30) {
        _ = try? streamSession(ws, start: startMessage, frames: Array(plans[0].frames.prefix(150)), realTime: false) { _, _, _, _ in }
    }
    usleep(300_000)
    let rssIdle = server.residentMB()
    // The floor's processes, loaded before the round so that they start with it.
    let engines = floor ? EngineProcesses(count: n) : nil
    if floor && engines == nil { print("  \(n) sessions: the floor's pocketsphinx_continuous could not be run") }

    var row = CapacityRow(sessions: n, design: design)
    let outcomes = Locked<[Int: SessionOutcome]>([:])
    let began = monotonicSeconds() + 0.2
    let cpuBefore = server.cpuSeconds()
    let floorCounters = Locked<ProcessCounters?>(nil)
    let floorThread = engines.map { engines in
        Thread {
            let streams = plans.map { EngineStream(delay: $0.delay, pcm: $0.frames.flatMap { $0 }) }
            let counters = engines.feed(streams, from: began)
            floorCounters.withLock { $0 = counters }
        }
    }
    floorThread?.start()
    let clientCPU = Locked(0.0)
    let threads: [Thread]
    switch client {
    case .threads:
        threads = plans.map { plan in
            Thread {
                let wait = began + plan.delay - monotonicSeconds()
                if wait > 0 { usleep(UInt32(wait * 1e6)) }
                // The session runs outside the lock: inside it, the sessions ran one after another.
                let outcome = runPlannedSession(port: port, plan: plan)
                outcomes.withLock { $0[plan.session] = outcome }
                let cpu = threadCPUSeconds()
                clientCPU.withLock { $0 += cpu }
            }
        }
    case .epoll:
        threads = [Thread {
            let talkers = EpollTalkers(port: port, began: began, start: startMessage,
                                       plans: plans.map { EpollTalkers.Plan(delay: $0.delay, frames: $0.frames) })
            var events = [SessionEvents](repeating: SessionEvents(), count: plans.count)
            let results = talkers.run { talker, type, event, at in events[talker].take(type, event, at: at) }
            var all: [Int: SessionOutcome] = [:]
            for (i, result) in results.enumerated() {
                switch result {
                case .refused(let response): all[plans[i].session] = refusal(response)
                case .failed(let why): all[plans[i].session] = .failed(why)
                case .streamed(let record):
                    all[plans[i].session] = .streamed(record, progress: events[i].progress, finals: events[i].finals)
                }
            }
            outcomes.withLock { $0 = all }
            let cpu = threadCPUSeconds()
            clientCPU.withLock { $0 += cpu }
        }]
    }
    threads.forEach { $0.start() }
    // Memory while every admitted session streams: the most seen, sampled twice a second.
    // And what admission decided on, every 2 s: the highest projected utilization, the talker
    // demand then, and the workers' wall-clock over CPU time in their jobs over the round.
    var rssPeak = rssIdle
    let workBefore = scrapeMetrics(port: port) ?? [:]
    var polls = 0
    while threads.contains(where: { !$0.isFinished }) {
        usleep(500_000)
        rssPeak = max(rssPeak, server.residentMB())
        polls += 1
        if polls % 4 == 0, let sample = scrapeMetrics(port: port),
           let utilization = sample["steno_admission_utilization"], utilization > row.peakUtilization {
            row.peakUtilization = utilization
            row.talkerDemandAtPeak = sample["steno_admission_talker_demand"] ?? 0
        }
    }
    let cpuAfter = server.cpuSeconds()
    let metrics = scrapeMetrics(port: port) ?? [:]
    let busy = (metrics["steno_worker_busy_seconds_total"] ?? 0) - (workBefore["steno_worker_busy_seconds_total"] ?? 0)
    let workerCPU = (metrics["steno_worker_cpu_seconds_total"] ?? 0) - (workBefore["steno_worker_cpu_seconds_total"] ?? 0)
    row.busyOverCPU = workerCPU > 0 ? busy / workerCPU : 0
    row.talkerDemandAtEnd = metrics["steno_admission_talker_demand"] ?? 0
    row.speechCost = metrics["steno_admission_speech_cost"] ?? 0
    row.speechFraction = metrics["steno_admission_speech_fraction"] ?? 0

    var streamed: [(SessionPlan, StreamedSession, [(at: Double, lag: Double)], [(at: Double, start: Double, end: Double, text: String)])] = []
    var reasons: [String: Int] = [:]
    let all = outcomes.withLock { $0 }
    for plan in plans {
        switch all[plan.session] {
        case .refused(let status, let reason, let retryAfter)?:
            row.refused += 1
            reasons["\(status) \(reason)\(retryAfter.map { ", Retry-After \($0)" } ?? ", no Retry-After")", default: 0] += 1
        case .failed(let why)?:
            row.failed += 1
            print("  session \(plan.session) failed: \(why)")
        case .streamed(let record, let progress, let finals)?:
            streamed.append((plan, record, progress, finals))
        case nil:
            row.failed += 1
        }
    }
    row.admitted = streamed.count
    var counted: [String] = reasons.keys.sorted().map { "\($0)" }
    let byMetrics = StenoMetricsReasons.map { ($0, Int(metrics[#"steno_handshakes_refused_total{reason="\#($0)"}"#] ?? 0)) }
        .filter { $0.1 > 0 }.map { "\($0.0) \($0.1)" }
    if !byMetrics.isEmpty { counted.append("/metrics " + byMetrics.joined(separator: ", ")) }
    row.refusalText = counted.joined(separator: "; ")

    // While every admitted session streamed: from the last one's start, for `seconds` (or to the
    // first one's end). A session streams until the round's last one would have streamed
    // `seconds`, so when the last ones are refused the admitted stream longer in a larger
    // round; without the bound, two rounds that admitted the same sessions would compare
    // different stretches of their speech (12 sessions' six against 8's six: 39 s against 33).
    let windowStart = streamed.map(\.1.startedAt).max() ?? 0
    let windowEnd = min(streamed.map(\.1.endSentAt).min() ?? 0, windowStart + seconds)
    var lags = streamed.flatMap { $0.2.filter { $0.at >= windowStart && $0.at <= windowEnd }.map(\.lag) }
    if lags.isEmpty {
        // Not a measurement of N at once: say so rather than quietly use every lag.
        print("  warning: the \(streamed.count) admitted sessions never all streamed at once; lag over all their progress")
        lags = streamed.flatMap { $0.2.map(\.lag) }
    }
    row.lagP50 = percentile(lags, 0.5)
    row.lagP95 = percentile(lags, 0.95)
    // Fairness under load: every session's own p95 over the same stretch (or all its progress,
    // as above), the lowest and the highest.
    let perSession = streamed.map { entry -> Double in
        let within = entry.2.filter { $0.at >= windowStart && $0.at <= windowEnd }.map(\.lag)
        return percentile(within.isEmpty ? entry.2.map(\.lag) : within, 0.95)
    }
    row.sessionLagP95Low = perSession.min() ?? 0
    row.sessionLagP95High = perSession.max() ?? 0
    // Finals in order: as they arrived, each starts where the one before ended or later.
    row.finalsOutOfOrder = streamed.filter { entry in
        zip(entry.3, entry.3.dropFirst()).contains { $1.start < $0.end - 1e-6 }
    }.count

    var latencies: [Double] = []
    for (plan, record, _, finals) in streamed {
        for utterance in plan.spoken {
            // The final that completes it: the last to arrive of those overlapping it.
            let overlapping = finals.filter { $0.start < utterance.end && $0.end > utterance.start }
            guard let last = overlapping.map(\.at).max(), last < record.endSentAt else { continue }
            let frame = min(record.sendTimes.count - 1, max(0, Int((utterance.end / 0.02).rounded(.up)) - 1))
            guard frame >= 0 else { continue }
            latencies.append(last - record.sendTimes[frame])
        }
        let hypothesis = finals.sorted { $0.start < $1.start }.flatMap { normalizedWords($0.text) }
        let reference = plan.spoken.filter { $0.start < Double(record.sendTimes.count) * 0.02 }.flatMap(\.reference)
        let alignment = align(reference: reference, hypothesis: hypothesis)
        row.wordErrors += alignment.errors
        row.referenceWords += alignment.referenceCount
        row.audioSeconds += plan.audioSeconds
        row.speechSeconds += plan.speechSeconds
    }
    row.finalsTimed = latencies.count
    row.finalP50 = percentile(latencies, 0.5)
    row.finalP95 = percentile(latencies, 0.95)
    row.cpuPerAudioSecond = row.audioSeconds > 0 ? (cpuAfter - cpuBefore) / row.audioSeconds : 0
    row.rssMB = rssPeak
    row.rssPerSessionMB = row.admitted > 0 ? (rssPeak - rssIdle) / Double(row.admitted) : 0
    row.clientCPU = clientCPU.withLock { $0 }
    if let floorThread {
        while !floorThread.isFinished { usleep(50_000) }
        let audio = plans.map(\.audioSeconds).reduce(0, +)
        row.floorCPUPerAudioSecond = floorCounters.withLock { $0 }.map { $0.cpu / audio }
    }
    return row
}

/// The refusal reasons of `steno_handshakes_refused_total` that load or limits give.
private let StenoMetricsReasons = ["overload", "capacity", "draining"]

private let startMessage = #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1},"format":"raw"}"#

private func runPlannedSession(port: Int, plan: SessionPlan) -> SessionOutcome {
    do {
        switch try WebSocketTestClient.attempt(port: port, timeout: 30) {
        case .refused(let response):
            return refusal(response)
        case .upgraded(let ws):
            var events = SessionEvents()
            let record = try streamSession(ws, start: startMessage, frames: plan.frames, realTime: true) { type, event, _, at in
                events.take(type, event, at: at)
            }
            return .streamed(record, progress: events.progress, finals: events.finals)
        }
    } catch {
        return .failed("\(error)")
    }
}

/// A refused upgrade: its status, the reason its JSON body gives (`status`), its Retry-After.
private func refusal(_ response: TestHTTPResponse) -> SessionOutcome {
    var reason = "?"
    if case .object(let body)? = try? JSONParser().parse(response.bodyText), case .string(let status)? = body["status"] {
        reason = status
    }
    return .refused(status: response.status, reason: reason, retryAfter: response.header("retry-after"))
}

/// What a round keeps of a session's events: lag of each `progress`, and the finals.
private struct SessionEvents {
    var progress: [(at: Double, lag: Double)] = []
    var finals: [(at: Double, start: Double, end: Double, text: String)] = []

    mutating func take(_ type: String, _ event: JSONObject, at: Double) {
        switch type {
        case "progress":
            if case .number(let received)? = event["received"], case .number(let analyzed)? = event["analyzed"] {
                progress.append((at, received - analyzed))
            }
        case "final":
            if case .number(let start)? = event["start"], case .number(let end)? = event["end"],
               case .string(let text)? = event["text"] {
                finals.append((at, start, end, text))
            }
        default:
            break
        }
    }
}

// MARK: - The plot

/// Lag p95 against N, one line per design, with the 1 s target and the compute bound; a
/// round where sessions were refused is drawn as a hollow point with the count.
private func capacitySVG(rows: [CapacityRow], designs: [CapacityDesign], bound: Double?, cores: Int) -> String {
    let width = 640.0, height = 400.0
    let left = 60.0, right = 20.0, top = 40.0, bottom = 50.0
    let maxN = Double(max(rows.map(\.sessions).max() ?? 1, Int((bound ?? 0).rounded(.up)))) + 1
    let worst = rows.map(\.lagP95).max() ?? 1
    let maxLag = max(2, (worst * 1.1).rounded(.up))
    func x(_ n: Double) -> Double { left + n / maxN * (width - left - right) }
    func y(_ lag: Double) -> Double { height - bottom - min(lag, maxLag) / maxLag * (height - top - bottom) }
    let colours: [CapacityDesign: String] = [.shared: "#1f77b4", .dedicated: "#d62728"]
    var svg = """
    <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
    <rect width="100%" height="100%" fill="white"/>
    <text x="\(Int(width / 2))" y="20" text-anchor="middle" font-size="14">steno-bench capacity: lag p95 against concurrent sessions (\(cores) cores)</text>

    """
    // Axes, ticks and grid.
    svg += svgLine(x(0), y(0), x(maxN), y(0), "black") + svgLine(x(0), y(0), x(0), y(maxLag), "black")
    let nStep = maxN > 20 ? 4.0 : 2.0
    for n in stride(from: 0.0, through: maxN, by: nStep) {
        svg += svgLine(x(n), y(0), x(n), y(0) + 5, "black")
        svg += svgText(x(n), y(0) + 18, "\(Int(n))", anchor: "middle")
    }
    let lagStep = maxLag > 10 ? (maxLag / 5).rounded(.up) : 1
    for lag in stride(from: 0.0, through: maxLag, by: lagStep) {
        svg += svgLine(x(0) - 5, y(lag), x(0), y(lag), "black") + svgLine(x(0), y(lag), x(maxN), y(lag), "#eeeeee")
        svg += svgText(x(0) - 8, y(lag) + 4, "\(Int(lag)) s", anchor: "end")
    }
    svg += svgText(x(maxN / 2), height - 12, "sessions (about half speech each), started one by one", anchor: "middle")
    svg += "<text transform=\"translate(16 \(Int(y(maxLag / 2)))) rotate(-90)\" text-anchor=\"middle\">lag p95 (s)</text>\n"
    // The target and the bound.
    svg += svgLine(x(0), y(1), x(maxN), y(1), "#2ca02c", dash: true) + svgText(x(maxN) - 4, y(1) - 4, "1 s target", anchor: "end", colour: "#2ca02c")
    if let bound {
        svg += svgLine(x(bound), y(0), x(bound), y(maxLag), "#7f7f7f", dash: true)
        svg += svgText(x(bound) - 4, y(maxLag) + 12, "compute bound \(format(bound, 1))", anchor: "end", colour: "#7f7f7f")
    }
    // One line per design.
    for (i, design) in designs.enumerated() {
        let colour = colours[design] ?? "black"
        let mine = rows.filter { $0.design == design }.sorted { $0.sessions < $1.sessions }
        let points = mine.map { "\(format(x(Double($0.sessions)), 1)),\(format(y($0.lagP95), 1))" }.joined(separator: " ")
        svg += "<polyline fill=\"none\" stroke=\"\(colour)\" stroke-width=\"2\" points=\"\(points)\"/>\n"
        for row in mine {
            let fill = row.refused > 0 ? "white" : colour
            svg += "<circle cx=\"\(format(x(Double(row.sessions)), 1))\" cy=\"\(format(y(row.lagP95), 1))\" r=\"4\" fill=\"\(fill)\" stroke=\"\(colour)\" stroke-width=\"2\"/>\n"
            if row.refused > 0 {
                svg += svgText(x(Double(row.sessions)), y(row.lagP95) - 8, "\(row.refused) refused", anchor: "middle", colour: colour, size: 10)
            }
        }
        let legendY = top + 14 + Double(i) * 16
        svg += svgLine(x(0) + 12, legendY - 4, x(0) + 32, legendY - 4, colour, widthValue: 2)
        svg += svgText(x(0) + 38, legendY, design == .shared ? "shared recognizers (default)" : "a decoder per session (--dedicated-recognizers)", anchor: "start")
    }
    svg += svgText(x(0) + 12, top + 14 + Double(designs.count) * 16, "hollow: sessions refused at the handshake (503)", anchor: "start", colour: "#555555", size: 10)
    svg += "</svg>\n"
    return svg
}

private func svgLine(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, _ colour: String, dash: Bool = false,
                  widthValue: Double = 1) -> String {
    "<line x1=\"\(format(x1, 1))\" y1=\"\(format(y1, 1))\" x2=\"\(format(x2, 1))\" y2=\"\(format(y2, 1))\" stroke=\"\(colour)\" stroke-width=\"\(format(widthValue, 0))\""
        + (dash ? " stroke-dasharray=\"6 4\"" : "") + "/>\n"
}

private func svgText(_ x: Double, _ y: Double, _ content: String, anchor: String, colour: String = "black", size: Int = 12) -> String {
    let escaped = content.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
    return "<text x=\"\(format(x, 1))\" y=\"\(format(y, 1))\" text-anchor=\"\(anchor)\" fill=\"\(colour)\" font-size=\"\(size)\">\(escaped)</text>\n"
}

// MARK: - Small things

/// The nearest-rank percentile (0 for none).
private func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    let rank = Int((p * Double(sorted.count)).rounded(.up))
    return sorted[max(0, min(sorted.count - 1, rank - 1))]
}

