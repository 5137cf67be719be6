import Foundation
import StenoAudio
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTestSupport

#if canImport(Glibc)
import Glibc
#endif

// steno-bench latency: how long a final takes, and `end` → `ended`, cut into their parts.
//
//   steno-bench latency [--steno PATH]... [--engine pocketsphinx|whisper] [--repeat N] [--pause SECONDS]
//                       [--offline-only] [--server-only] [--options "ARGS"]... [--given-options-only]
//                       [--endpoint SPEC]... [--fresh] [--serve-args "ARGS"]
//
// `--engine` is the servers' engine (`steno serve --engine`; default pocketsphinx). Whisper's
// finals come from its worker, not from a job the debug line times, so a Whisper server's
// finals are counted under "other" with their totals only, and the second part (pocketsphinx's
// decoder options, in process) is left out: bench/streaming.py measures Whisper's options.
// `--serve-args`: more options for every `steno serve` (split at spaces).
//
// 1. A real server (each `--steno` binary, a release build, its own process, with
//    `--log-level debug`), real speech sent in real time in 20 ms PCM messages: one session
//    with every test file in turn (LibriVox, cards, the TTS sentences, Beckett), each followed by
//    `--pause` seconds of quiet, and then one short session per LibriVox file ended right after
//    its last sample. For each final the client knows when it sent the audio at the final's
//    end and when the final came; the server's debug line for it (`latency session=…`, made by
//    StreamSession) says where the detector decided the utterance was over and when each step
//    ran. The parts, p50 and p95 over the finals the speech detector ended:
//      silence   the final's last word's end → the sample after which the detector had seen
//                enough silence (`-vad_postspeech` frames, and what it counts as speech)
//      block     → the end of the 128 ms analysis block holding it (the CLI's endpointing grid)
//      batch     sending the block's last sample → the session handing its batch to the lane
//                (the network in, and waiting for the batch to fill)
//      lane      → the lane's job starting (the worker pool)
//      analysis  → the utterance's close beginning (front end and search of the batch)
//      search    ps_end_utt (the rest of the search; with -fwdflat, its second pass)
//      words     the final's words: lattice, best path (-bestpath), word posteriors
//      machine   → the final queued on the connection (mapping, the session machine)
//      out       → the client reading it (lws thread, socket)
//    and `end` → `ended`: in (sending `end` → its job queued), lane, analysis (the last
//    incomplete block), search, words, machine, out. Several binaries are run in turn, round
//    after round, so their figures are side by side.
// 2. In process, no server: the same stream through a recognizer per decoder option set
//    (Steno's defaults, and each `--options`): word error rate per set against the references,
//    and the parts that are the engine's alone (silence, block, search + words CPU), so that
//    a change of `-vad_postspeech` or `-fwdflat` can be weighed, words against latency.
//    Each `--endpoint` (`early=S,end=LOG10,late=S`, or `detector`; see Endpointing.swift) runs
//    every option set again with that endpointing. `--fresh`: each file (and its pause) in a
//    session of its own, so that no utterance's words depend on how the ones before it ended
//    (the cepstral mean carries over a session's utterances, and moves with every change).
//    With STENO_ENDPOINT_TRACE set in the environment, every final is printed too (start, end,
//    where it was decided over, text), so that two endpointings' finals can be compared; and
//    the first part's server finals of the long session (start, end, text).
//
// Figures on a loaded machine are noisy in the queueing parts (lane, out); silence and block
// do not depend on the machine at all.

func runLatencyBench(_ arguments: [String]) {
    var stenos: [String] = []
    var repeats = 1
    var pause = 1.5
    var offline = true
    var server = true
    var optionSets: [[String]] = []
    var endpoints: [(String, Endpointing)] = []
    var withDefaults = true
    var fresh = false
    var engine = "pocketsphinx"
    var serveArguments: [String] = []
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? arguments[index + 1] : ""
        switch arguments[index] {
        case "--steno": stenos.append(value); index += 1
        case "--engine":
            guard ["pocketsphinx", "whisper"].contains(value) else {
                print("latency benchmark: --engine takes pocketsphinx or whisper, not \(value)")
                return
            }
            engine = value
            index += 1
        case "--serve-args": serveArguments += value.split(separator: " ").map(String.init); index += 1
        case "--repeat": repeats = max(1, Int(value) ?? repeats); index += 1
        case "--pause": pause = max(0.6, Double(value) ?? pause); index += 1
        case "--offline-only": server = false
        case "--given-options-only": withDefaults = false
        case "--fresh": fresh = true
        case "--server-only": offline = false
        case "--options": optionSets.append(value.split(separator: " ").map(String.init)); index += 1
        case "--endpoint":
            guard let endpoint = Endpointing(spec: value) else {
                print("latency benchmark: --endpoint takes early=SECONDS,end=LOG10,late=SECONDS or detector, not \(value)")
                return
            }
            endpoints.append((value, endpoint))
            index += 1
        default: print("latency benchmark: unknown argument \(arguments[index])"); return
        }
        index += 1
    }
    if stenos.isEmpty { stenos = [".build/release/steno"] }
    let sets: [LatencySet]
    do { sets = try LatencySet.standard() } catch {
        print("latency benchmark: \(error)")
        return
    }
    let stream = LatencyStream(sets: sets, pause: pause)
    print("latency benchmark: \(stream.files.count) files (\(sets.map { "\($0.name) \($0.files.count)" }.joined(separator: ", "))), "
        + "\(format(stream.seconds, 1)) s with \(format(pause, 1)) s pauses; load average \(loadAverage())")
    if server {
        for steno in stenos where !FileManager.default.isExecutableFile(atPath: steno) {
            print("latency benchmark: no steno binary at \(steno) (swift build -c release --product steno)")
            return
        }
        runServerLatency(stenos: stenos, engine: engine, serveArguments: serveArguments, repeats: repeats, stream: stream, endFiles: sets.first?.files ?? [])
    }
    if offline && engine != "pocketsphinx" {
        print("")
        print("  in process: pocketsphinx's decoder options only (for \(engine)'s, bench/streaming.py)")
    } else if offline {
        let configuration = PocketSphinxConfiguration()
        runOfflineLatency(stream: stream, optionSets: (withDefaults ? [PocketSphinxConfiguration.recommendedArguments] : []) + optionSets,
                          endpoints: endpoints.isEmpty ? [("default", configuration.endpointing)] : endpoints, fresh: fresh)
    }
}

// MARK: - The audio

/// A labelled set of files (LibriVox, cards, TTS).
struct LatencySet {
    struct File {
        let name: String
        let samples: [Int16]
        let reference: [String]
    }
    let name: String
    let files: [File]

    static func standard() throws -> [LatencySet] {
        let resources = "Tests/StenoSpeechTests/Resources"
        return [
            try load("LibriVox", "\(resources)/librivox", "transcription"),
            try load("cards", "\(resources)/cards", "cards.transcription"),
            try load("TTS", "bench/phrases/tts", "transcription"),
            LatencySet(name: "Beckett", files: [File(name: "beckett", samples: try wav("\(resources)/beckett.wav"),
                reference: normalizedWords("ever tried ever failed no matter try again fail again fail better"))]),
        ]
    }

    /// Files named in a pocketsphinx-testdata transcription: `<s> words </s> (name)`.
    private static func load(_ name: String, _ folder: String, _ transcription: String) throws -> LatencySet {
        let text = try String(contentsOfFile: "\(folder)/\(transcription)", encoding: .utf8)
        var files: [File] = []
        for line in text.split(separator: "\n") {
            guard let open = line.lastIndex(of: "("), let close = line.lastIndex(of: ")"), open < close else { continue }
            let id = String(line[line.index(after: open)..<close])
            files.append(File(name: id, samples: try wav("\(folder)/\(id).wav"), reference: normalizedWords(String(line[..<open]))))
        }
        return LatencySet(name: name, files: files)
    }

    static func wav(_ path: String) throws -> [Int16] {
        do throws(StenoError) {
            let file = try WAVFile(path: path)
            guard file.sampleRate == 16000 else { throw StenoError(.badAudio, "\(path) is not 16 kHz") }
            return file.mono.map { PocketSphinxRecognizerInput.pcm16($0) }
        } catch {
            throw NSError(domain: "steno-bench", code: 1, userInfo: [NSLocalizedDescriptionKey: error.message])
        }
    }

}

/// 16-bit conversion as the recognizer does it (the files are 16-bit already: exact).
private enum PocketSphinxRecognizerInput {
    static func pcm16(_ sample: Float) -> Int16 { Int16(max(-32768, min(32767, (sample * 32768).rounded()))) }
}

/// Every file in turn, each followed by a pause of quiet noise (±2 of 16 bits: what a quiet
/// room gives a microphone; digital zeros would be no pause a detector meets in life).
struct LatencyStream {
    struct Placed {
        let set: String
        let file: LatencySet.File
        let start: Double
        let end: Double
    }
    let files: [Placed]
    let samples: [Int16]
    var seconds: Double { Double(samples.count) / 16000 }

    init(sets: [LatencySet], pause: Double) {
        var samples: [Int16] = []
        var placed: [Placed] = []
        var generator = SplitMix(seed: 15)
        for set in sets {
            for file in set.files {
                let start = Double(samples.count) / 16000
                samples += file.samples
                placed.append(Placed(set: set.name, file: file, start: start, end: Double(samples.count) / 16000))
                for _ in 0..<Int(pause * 16000) { samples.append(Int16(Int(generator.next() % 5) - 2)) }
            }
        }
        self.files = placed
        self.samples = samples
    }

    /// Word errors per set: each final goes to the file its middle falls in (or its pause).
    func errors(_ finals: [(start: Double, end: Double, text: String)]) -> [(set: String, errors: Int, words: Int)] {
        var heard = [[String]](repeating: [], count: files.count)
        for final in finals {
            let middle = (final.start + final.end) / 2
            let at = files.lastIndex(where: { $0.start <= middle }) ?? 0
            heard[at] += normalizedWords(final.text)
        }
        var result: [(set: String, errors: Int, words: Int)] = []
        for (index, placed) in files.enumerated() {
            let e = align(reference: placed.file.reference, hypothesis: heard[index]).errors
            if let last = result.last, last.set == placed.set {
                result[result.count - 1] = (last.set, last.errors + e, last.words + placed.file.reference.count)
            } else {
                result.append((placed.set, e, placed.file.reference.count))
            }
        }
        return result
    }
}

// MARK: - In process

private func runOfflineLatency(stream: LatencyStream, optionSets: [[String]], endpoints: [(String, Endpointing)], fresh: Bool) {
    print("")
    print(fresh
        ? "  in process, each file and its pause through a recognizer of its own, per option set: word errors, and the engine's parts"
        : "  in process, the same stream through one recognizer per option set: word errors, and the engine's parts")
    print("  of a final the detector or the search's early end ended (seconds, p50 / p95; ending CPU: the thread's CPU for ps_end_utt, words, posteriors)")
    var rows: [[String]] = []
    var setNames: [String] = []
    // Fresh: every file from its start to the next one's (its pause included).
    let pieces: [Range<Int>] = fresh
        ? stream.files.indices.map { index in
            let start = Int((stream.files[index].start * 16000).rounded())
            let end = index + 1 < stream.files.count ? Int((stream.files[index + 1].start * 16000).rounded()) : stream.samples.count
            return start..<end
        }
        : [0..<stream.samples.count]
    let floats = stream.samples.map { Float($0) / 32768 }
    let trace = ProcessInfo.processInfo.environment["STENO_ENDPOINT_TRACE"] != nil
    for (endpointName, endpointing) in endpoints {
        for arguments in optionSets {
            let name = arguments.joined(separator: " ") + (endpoints.count > 1 ? " [\(endpointName)]" : "")
            do {
                var configuration = PocketSphinxConfiguration(arguments: arguments, recognizers: 1)
                configuration.endpointing = endpointing
                let engine = try PocketSphinxEngine(configuration: configuration)
                var finals: [(start: Double, end: Double, text: String)] = []
                var silence: [Double] = [], block: [Double] = [], ending: [Double] = []
                for piece in pieces {
                    let recognizer = try engine.makeRecognizer()
                    let origin = Double(piece.lowerBound) / 16000
                    func take(_ produced: [TranscriberEvent]) {
                        for case .final(let result) in produced {
                            finals.append((origin + result.range.start, origin + result.range.end, result.text))
                            if trace {
                                let decided = recognizer.lastUtteranceTiming?.detectorDecidedAt.map { origin + $0 } ?? -1
                                print("final start=\(origin + result.range.start) end=\(origin + result.range.end) decided=\(decided) text=\(result.text)")
                            }
                            if let t = recognizer.lastUtteranceTiming, let decided = t.detectorDecidedAt {
                                silence.append(decided - result.range.end)
                                block.append(t.closedAt - decided)
                                ending.append(t.cpuSeconds)
                            }
                        }
                    }
                    var offset = piece.lowerBound
                    while offset < piece.upperBound {
                        let end = min(piece.upperBound, offset + 320)
                        take(try recognizer.accept(Array(floats[offset..<end])))
                        offset = end
                    }
                    take(try recognizer.finish())
                }
                let errors = stream.errors(finals)
                if setNames.isEmpty { setNames = errors.map(\.set) }
                let total = errors.reduce((0, 0)) { ($0.0 + $1.errors, $0.1 + $1.words) }
                rows.append([name, "\(finals.count)"]
                    + errors.map { "\($0.errors)/\($0.words)" }
                    + ["\(format(100 * Double(total.0) / Double(max(1, total.1)), 1)) %", medianAndP95(silence), medianAndP95(block), medianAndP95(ending)])
            } catch {
                rows.append([name, "failed: \(error)"])
            }
        }
    }
    printTable(["options", "finals"] + setNames + ["WER", "silence", "block", "ending CPU"], rows)
}

// MARK: - Helpers

extension Endpointing {
    /// `detector`, or `early=SECONDS,end=LOG10,late=SECONDS` (each part optional).
    init?(spec: String) {
        self = .detector
        guard spec != "detector" else { return }
        for part in spec.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, let value = Double(pair[1]), value.isFinite else { return nil }
            switch pair[0] {
            case "early": earlySilence = value
            case "end": sentenceEnd = value
            case "late": lateSilence = value
            default: return nil
            }
        }
    }
}

/// "p50 / p95" of `values`, or "-" for none.
func medianAndP95(_ values: [Double]) -> String {
    values.isEmpty ? "-" : "\(format(percentile(values, 0.5), 3)) / \(format(percentile(values, 0.95), 3))"
}


func printTable(_ header: [String], _ rows: [[String]]) {
    let columns = max(header.count, rows.map(\.count).max() ?? 0)
    var widths = [Int](repeating: 0, count: columns)
    for row in [header] + rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
    for row in [header] + rows {
        print("  " + row.enumerated().map { i, cell in cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }.joined(separator: "  "))
    }
}
