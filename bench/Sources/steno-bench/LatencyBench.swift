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
//   steno-bench latency [--steno PATH]... [--repeat N] [--pause SECONDS] [--offline-only]
//                       [--server-only] [--options "ARGS"]... [--given-options-only] [--endpoint SPEC]... [--fresh]
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
//    where it was decided over, text), so that two endpointings' finals can be compared.
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
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? arguments[index + 1] : ""
        switch arguments[index] {
        case "--steno": stenos.append(value); index += 1
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
        runServerLatency(stenos: stenos, repeats: repeats, stream: stream, endFiles: sets.first?.files ?? [])
    }
    if offline {
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
                reference: words("ever tried ever failed no matter try again fail again fail better"))]),
        ]
    }

    /// Files named in a pocketsphinx-testdata transcription: `<s> words </s> (name)`.
    private static func load(_ name: String, _ folder: String, _ transcription: String) throws -> LatencySet {
        let text = try String(contentsOfFile: "\(folder)/\(transcription)", encoding: .utf8)
        var files: [File] = []
        for line in text.split(separator: "\n") {
            guard let open = line.lastIndex(of: "("), let close = line.lastIndex(of: ")"), open < close else { continue }
            let id = String(line[line.index(after: open)..<close])
            files.append(File(name: id, samples: try wav("\(folder)/\(id).wav"), reference: words(String(line[..<open]))))
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

    /// Lowercase words without markup or punctuation; the abbreviations the recognizer spells
    /// as the references spell them.
    static func words(_ text: String) -> [String] {
        let spelled = ["mr": "mister", "mrs": "missus", "dr": "doctor"]
        return text.lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { token in
            if token.hasPrefix("<") { return nil }
            let bare = String(token.filter { $0.isLetter || $0.isNumber || $0 == "'" })
            return bare.isEmpty ? nil : (spelled[bare] ?? bare)
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
            heard[at] += LatencySet.words(final.text)
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

// MARK: - The server

/// One server's debug line for a job (see StreamSession.logLatency).
private struct LatencyLine {
    var session = ""
    var job = ""
    var fields: [String: Double] = [:]

    init?(_ line: Substring) {
        guard let range = line.range(of: "latency session=") else { return nil }
        for pair in line[range.lowerBound...].split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            switch parts[0] {
            case "session": session = String(parts[1])
            case "job": job = String(parts[1])
            default: if let value = Double(parts[1]) { fields[String(parts[0])] = value }
            }
        }
    }

    subscript(_ name: String) -> Double? { fields[name] }
}

/// What a client saw of one session.
private struct ClientSession {
    var id = ""
    /// Monotonic time each 20 ms message was sent.
    var sentAt: [Double] = []
    var finals: [(start: Double, end: Double, text: String, receivedAt: Double)] = []
    var endSentAt: Double?
    var endedAt: Double?

    /// When the audio at `time` (session seconds) was sent.
    func sent(at time: Double) -> Double? {
        sentAt.isEmpty ? nil : sentAt[min(sentAt.count - 1, max(0, Int(time / 0.02)))]
    }
}

private let finalParts = ["silence", "block", "batch", "lane", "analysis", "search", "words", "machine", "out", "(CPU)"]
private let endParts = ["in", "lane", "analysis", "search", "words", "machine", "out", "(CPU)"]

private struct Breakdown {
    var finals: [String: [Double]] = [:]
    var finalTotals: [Double] = []
    var otherFinals: [Double] = []
    var ends: [String: [Double]] = [:]
    var endTotals: [Double] = []
    var unmatched = 0
    var errors: [(set: String, errors: Int, words: Int)] = []

    mutating func add(_ client: ClientSession, _ lines: [LatencyLine]) {
        let mine = lines.filter { $0.session == client.id }
        for final in client.finals {
            guard let sentEnd = client.sent(at: final.end) else { continue }
            let total = final.receivedAt - sentEnd
            guard let line = mine.first(where: { ($0["final_end"] ?? -1) >= final.end - 0.0015 && ($0["final_end"] ?? 99) <= final.end + 0.0015 }) else {
                unmatched += 1
                otherFinals.append(total)
                continue
            }
            guard line.job == "batch", let decided = line["decided"], let closed = line["closed"],
                  let submitted = line["submitted"], let started = line["started"], let close = line["close"],
                  let search = line["search"], let words = line["words"], let queued = line["queued"],
                  let sentBlock = client.sent(at: max(0, closed - 0.0001)) else {
                otherFinals.append(total)
                continue
            }
            let parts: [String: Double] = [
                "silence": decided - final.end, "block": closed - decided, "batch": submitted - sentBlock,
                "lane": started - submitted, "analysis": close - started, "search": search, "words": words,
                "machine": queued - close - search - words - (line["alternatives"] ?? 0), "out": final.receivedAt - queued,
                "(CPU)": line["cpu"] ?? .nan,
            ]
            for (name, value) in parts { finals[name, default: []].append(value) }
            finalTotals.append(total)
        }
        if let endSent = client.endSentAt, let ended = client.endedAt, !mine.contains(where: { $0.job == "end" }) {
            endTotals.append(ended - endSent)  // a server without the debug lines: the total only
        }
        if let endSent = client.endSentAt, let ended = client.endedAt,
           let line = mine.first(where: { $0.job == "end" }), let submitted = line["submitted"],
           let started = line["started"], let queued = line["queued"] {
            let close = line["close"] ?? queued
            let search = line["search"] ?? 0
            let words = line["words"] ?? 0
            let parts: [String: Double] = [
                "in": submitted - endSent, "lane": started - submitted, "analysis": close - started,
                "search": search, "words": words, "machine": queued - close - search - words, "out": ended - queued,
                "(CPU)": line["cpu"] ?? 0,
            ]
            for (name, value) in parts { ends[name, default: []].append(value) }
            endTotals.append(ended - endSent)
        }
    }
}

private func runServerLatency(stenos: [String], repeats: Int, stream: LatencyStream, endFiles: [LatencySet.File]) {
    var results = [Breakdown](repeating: Breakdown(), count: stenos.count)
    for round in 0..<repeats {
        for (which, steno) in stenos.enumerated() {
            print("  round \(round + 1), \(steno): load \(loadAverage())")
            guard let measured = measureServerLatency(steno: steno, stream: stream, endFiles: endFiles) else {
                print("  \(steno): failed")
                continue
            }
            for (client, lines) in measured.sessions { results[which].add(client, lines) }
            if results[which].errors.isEmpty { results[which].errors = measured.errors }
        }
    }
    print("")
    print("  finals the detector ended, seconds (p50 / p95); total = sending the audio at the final's end → reading the final")
    let header = ["binary", "n", "total"] + finalParts + ["other"]
    var rows: [[String]] = []
    for (which, steno) in stenos.enumerated() {
        let r = results[which]
        var row = [(steno as NSString).lastPathComponent, "\(r.finalTotals.count)", pair(r.finalTotals)]
        row += finalParts.map { pair(r.finals[$0] ?? []) }
        row.append(r.otherFinals.isEmpty ? "-" : "\(r.otherFinals.count): " + pair(r.otherFinals))
        rows.append(row)
    }
    printTable(header, rows)
    print("  other: finals not ended by the detector (by `end`) or with no debug line, their total; unmatched finals: "
        + results.map { "\($0.unmatched)" }.joined(separator: ", "))
    print("")
    print("  end → ended, seconds (p50 / p95)")
    rows = []
    for (which, steno) in stenos.enumerated() {
        let r = results[which]
        rows.append([(steno as NSString).lastPathComponent, "\(r.endTotals.count)", pair(r.endTotals)] + endParts.map { pair(r.ends[$0] ?? []) })
    }
    printTable(["binary", "n", "total"] + endParts, rows)
    print("")
    print("  word errors of the server's finals (the long session), per set")
    rows = []
    for (which, steno) in stenos.enumerated() {
        rows.append([(steno as NSString).lastPathComponent] + results[which].errors.map {
            "\($0.set) \($0.errors)/\($0.words) = \(format(100 * Double($0.errors) / Double(max(1, $0.words)), 1)) %"
        })
    }
    printTable(["binary"] + (results.first?.errors.map { _ in "" } ?? []), rows)
}

private func measureServerLatency(steno: String, stream: LatencyStream, endFiles: [LatencySet.File])
    -> (sessions: [(ClientSession, [LatencyLine])], errors: [(set: String, errors: Int, words: Int)])? {
    let logPath = NSTemporaryDirectory() + "steno-bench-latency-\(getpid()).log"
    unlink(logPath)
    defer { unlink(logPath) }
    // Two decoders, made before the measured sessions (a warm-up session waits for them).
    guard let server = Child.spawn(steno, ["serve", "--engine", "pocketsphinx", "--port", "0", "--idle-timeout", "0", "--recognizers", "2",
                                           "--log-level", "debug", "--web-root", "/nonexistent"],
                                   stdout: true, stderrPath: logPath),
          let port = server.readPort() else { return nil }
    defer { server.terminate() }
    _ = latencySession(port: port, samples: Array(stream.samples.prefix(32000)), realTime: false)
    usleep(1_500_000)

    var clients: [ClientSession] = []
    guard let long = latencySession(port: port, samples: stream.samples, realTime: true) else { return nil }
    clients.append(long)
    for file in endFiles {
        if let short = latencySession(port: port, samples: file.samples, realTime: true) { clients.append(short) }
    }
    usleep(200_000)
    let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    let lines = text.split(separator: "\n").compactMap(LatencyLine.init)
    let errors = stream.errors(long.finals.map { ($0.start, $0.end, $0.text) })
    return (clients.map { ($0, lines) }, errors)
}

/// One session: `start` (16 kHz PCM), the samples in 20 ms messages (in real time, or as fast
/// as the server takes them), `end` right after the last one; what the client saw.
private func latencySession(port: Int, samples: [Int16], realTime: Bool) -> ClientSession? {
    do {
        // Admission may refuse a new session for a moment after a busy one (503): try again.
        var attempt = 0
        var connected: WebSocketTestClient?
        while connected == nil {
            do { connected = try WebSocketTestClient.connect(port: port, timeout: 30) } catch {
                attempt += 1
                guard "\(error)".contains("503"), attempt < 60 else { throw error }
                usleep(500_000)
            }
        }
        guard let ws = connected else { return nil }
        try ws.sendText(#"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#)
        var session = ClientSession()
        func handle(_ message: WebSocketTestClient.Message) throws {
            let now = monotonicSeconds()
            guard case .text(let text) = message, case .object(let event) = try JSONParser().parse(text),
                  case .string(let type)? = event["type"] else { return }
            switch type {
            case "ready":
                if case .string(let id)? = event["session"] { session.id = id }
            case "final":
                if case .number(let start)? = event["start"], case .number(let end)? = event["end"],
                   case .string(let words)? = event["text"] {
                    session.finals.append((start, end, words, now))
                }
            case "ended": session.endedAt = now
            default: break
            }
        }
        func readAvailable(until deadline: Double) throws {
            while session.endedAt == nil {
                let wait = max(0, deadline - monotonicSeconds())
                var p = pollfd(fd: ws.stream.readFD, events: Int16(POLLIN), revents: 0)
                guard ws.stream.buffered > 0 || poll(&p, 1, Int32(wait * 1000)) > 0 else { return }
                try handle(ws.receive(timeout: 30))
            }
        }
        let step = 320
        let began = monotonicSeconds()
        var offset = 0
        while offset < samples.count {
            let end = min(samples.count, offset + step)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(2 * (end - offset))
            for sample in samples[offset..<end] {
                let bits = UInt16(bitPattern: sample)
                bytes.append(UInt8(bits & 0xff))
                bytes.append(UInt8(bits >> 8))
            }
            session.sentAt.append(monotonicSeconds())
            try ws.sendBinary(bytes, timeout: 60)
            offset = end
            try readAvailable(until: realTime ? began + Double(session.sentAt.count) * 0.02 : 0)
        }
        session.endSentAt = monotonicSeconds()
        try ws.sendText(#"{"type":"end"}"#)
        while session.endedAt == nil { try handle(ws.receive(timeout: 120)) }
        _ = try? ws.close()
        return session
    } catch {
        print("  session failed: \(error)")
        return nil
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
                    + ["\(format(100 * Double(total.0) / Double(max(1, total.1)), 1)) %", pair(silence), pair(block), pair(ending)])
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

private func percentile(_ values: [Double], _ p: Double) -> Double {
    steno_bench.percentile(values, p, empty: .nan)
}

private func pair(_ values: [Double]) -> String {
    values.isEmpty ? "-" : "\(format(percentile(values, 0.5), 3)) / \(format(percentile(values, 0.95), 3))"
}


private func printTable(_ header: [String], _ rows: [[String]]) {
    let columns = max(header.count, rows.map(\.count).max() ?? 0)
    var widths = [Int](repeating: 0, count: columns)
    for row in [header] + rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
    for row in [header] + rows {
        print("  " + row.enumerated().map { i, cell in cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }.joined(separator: "  "))
    }
}
