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
// half speech), each on its own WebSocket connection to a `steno serve --engine E` child
// (release build; `--engine whisper`, the default, or `pocketsphinx`),
// in real time (20 ms messages), started one by one `--stagger` seconds apart so that
// admission can measure each new talker before the next comes, all streaming together for
// `--seconds` after the last has started. For each N and each design (the shared recognizer
// pool, and the old decoder per session: `steno-bench dedicated-server --recognizers N`):
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
// Next to them: the compute bound cores ÷ (speech fraction × engine RTF), the RTF being the
// engine's own cost on the same speech, measured in the same run, before the rounds and after
// them (the mean of the two): for pocketsphinx, `pocketsphinx_continuous` with Steno's decoder
// options fed it through a pipe in real time; for Whisper, the same model's batch transcription
// of each whole file (bench/whisper_floor.py, the fair floor of a neural engine). With Whisper
// the server's CPU and memory include its worker process's, and the round has one design (the
// worker serves every session: `--designs dedicated` is pocketsphinx's decoder per session). `--svg PATH` draws lag p95 against N for both designs.
//
//   steno-bench capacity [--engine whisper|pocketsphinx] [--counts 2,4,6,8,10,12,14,16] [--seconds 30] [--stagger 1.5]
//                        [--designs shared,dedicated] [--rtf-seconds 40] [--svg bench/capacity.svg]
//                        [--steno .build/release/steno] [--no-admission] [--admit-utilization F]
//                        [--endpointing MODE] [--recognizers N] [--spare-recognizers N]
//                        [--client epoll|threads] [--floor-counts 4] [--retry SECONDS]
//
// `--retry S` (with `--client threads`): a refused talker tries again after the refusal's
// Retry-After, as `steno send` does, for up to S seconds, and speaks from when it is let in
// (every plan is S seconds longer, so that all still stream together for `--seconds`); the
// round says how many were let in on a retry and how long after their first attempt.
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
    var engine = "whisper"
    var designsGiven = false
    var retry: Double?
    var index = 0
    while index < arguments.count {
        let value = arguments[safe: index + 1]
        switch arguments[index] {
        case "--counts": counts = value?.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 } ?? counts
        case "--seconds": seconds = value.flatMap(Double.init) ?? seconds
        case "--stagger": stagger = value.flatMap(Double.init) ?? stagger
        case "--rtf-seconds": rtfSeconds = value.flatMap(Double.init) ?? rtfSeconds
        case "--designs":
            designs = value?.split(separator: ",").compactMap { CapacityDesign(rawValue: String($0)) } ?? designs
            designsGiven = true
        case "--engine":
            guard let chosen = value, ["whisper", "pocketsphinx"].contains(chosen) else {
                print("capacity benchmark: --engine whisper or --engine pocketsphinx")
                return
            }
            engine = chosen
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
        case "--retry":
            guard let given = value.flatMap(Double.init), given > 0 else {
                print("capacity benchmark: --retry SECONDS (how long a refused talker keeps trying)")
                return
            }
            retry = given
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
    if retry != nil && client != .threads {
        print("capacity benchmark: --retry takes --client threads")
        return
    }
    if engine == "whisper" {
        // One worker serves every session: the decoder per session is pocketsphinx's design, and
        // the floor fed alongside is pocketsphinx_continuous.
        if designsGiven && designs.contains(.dedicated) { print("capacity benchmark: --designs dedicated is pocketsphinx's; whisper has shared only") }
        designs = [.shared]
        if !floorCounts.isEmpty {
            print("capacity benchmark: --floor-counts feeds pocketsphinx_continuous; with whisper the bound's floor is the batch one")
            floorCounts = []
        }
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
    print("  steno: \(steno) --engine \(engine), \(cores) cores, load average \(loadAverage()) at the start, client: "
        + (client == .epoll ? "one thread (epoll)" : "a thread per session") + (admission ? "" : "; no load admission (--lag-target 0)")
        + (serveOptions.isEmpty ? "" : "; " + serveOptions.joined(separator: " ")))
    print("")

    // The engine's own cost on this speech, in this run.
    let measureRTF = { engine == "whisper" ? measureWhisperFloor(speech: speech, seconds: rtfSeconds)
                                           : measureEngineRTF(speech: speech, seconds: rtfSeconds) }
    let floorName = engine == "whisper" ? "Whisper's batch transcription of each whole file (bench/whisper_floor.py)"
                                        : "pocketsphinx_continuous (Steno's decoder options)"
    let rtf = measureRTF()
    if let rtf {
        print("  engine: \(floorName) on \(format(rtf.audioSeconds, 1)) s of the speech"
            + (engine == "whisper" ? "" : " through a pipe in real time")
            + ": RTF \(format(rtf.value, 3)) (model loading of \(format(rtf.loading, 2)) s CPU left out)")
    } else {
        print("  engine: \(floorName) could not be run; no compute bound")
    }

    var rows: [CapacityRow] = []
    for n in counts {
        // A talker let in on a retry speaks its plan from then on: every plan is longer by the
        // time a talker may keep trying, so that all still stream together for `seconds`.
        let plans = (0..<n).map { SessionPlan(session: $0, of: n, speech: speech, seconds: seconds + (retry ?? 0), stagger: stagger) }
        for design in designs {
            guard let row = measureCapacity(steno: steno, engine: engine, design: design, plans: plans, seconds: seconds,
                                            admission: admission, serveOptions: serveOptions, client: client, retry: retry,
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
    let rtfAfter = rtf == nil ? nil : measureRTF()
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

enum CapacityDesign: String {
    case shared, dedicated
}

/// How the sessions of a round are driven: all from one thread (epoll), or a thread each.
enum CapacityClient: String {
    case epoll, threads
}
