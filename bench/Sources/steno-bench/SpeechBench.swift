// The speech benchmark: what a pocketsphinx session costs and how well it recognizes.
//
//   steno-bench speech [--quick] [--only speed|memory|options] [--sessions N] [--chunk SAMPLES]
//                      [--repeat N] [--options "ARGS" ...] [WAV...]
//
// 1. Speed: CPU seconds per audio second (real-time factor) of StenoSpeech's streaming
//    recognizer, fed 20 ms chunks, with and without partial results; the bare pocketsphinx
//    loop of the CLI (ps_process_raw on 2048-sample blocks, ps_get_in_speech, ps_end_utt,
//    ps_get_hyp) in this process on a fresh decoder, the floor; and `pocketsphinx_continuous
//    -infile` itself on the same files (a subprocess under /usr/bin/time, minus the CPU of a
//    run on 0.1 s of silence, which is its model loading). Ratios against both.
// 2. Memory and start-up: resident memory per session (RSS growth with N sessions open at once,
//    each with a decoder of its own), the CLI's peak RSS, the time to make a decoder, and the
//    time to start a session on a pooled decoder (reset included).
// 3. Decoder options: word error rate against the references (librivox/, cards/) and the
//    real-time factor for each option set (default; -maxhmmpf 3000 -maxwpf 10; …; add your own
//    with --options "-name value ..."), and how well confidences separate right from wrong
//    words.
//
// Files: Debian's pocketsphinx-testdata (librivox/*.wav with `transcription`, cards/00[1-5].wav
// with `cards.transcription`) and Tests/StenoSpeechTests/Resources/beckett.wav (run from the
// package root); extra WAV paths (16-bit mono 16 kHz) are added to the speed table.
// --quick uses fewer option sets. Timings on a shared 2-core machine are noisy: each figure is
// the best of --repeat runs (default 3).

import CPocketSphinx
import Foundation
import StenoCore
import StenoSession
import StenoSpeech

func runSpeechBench(_ arguments: [String]) {
    var settings = SpeechBenchSettings()
    var index = 0
    while index < arguments.count {
        let argument = arguments[index]
        let value = index + 1 < arguments.count ? arguments[index + 1] : nil
        switch (argument, value) {
        case ("--quick", _): settings.quick = true
        case ("--sessions", let value?): settings.sessions = max(1, Int(value) ?? settings.sessions); index += 1
        case ("--chunk", let value?): settings.chunk = max(1, Int(value) ?? settings.chunk); index += 1
        case ("--repeat", let value?): settings.repeats = max(1, Int(value) ?? settings.repeats); index += 1
        case ("--only", let value?): settings.only = value; index += 1
        case ("--options", let value?):
            settings.extraOptionSets.append(value.split(separator: " ").map(String.init)); index += 1
        default:
            if argument.hasPrefix("--") {
                print("speech bench: unknown argument \(argument)")
                return
            }
            settings.extraFiles.append(argument)
        }
        index += 1
    }
    do {
        try SpeechBench(settings: settings).run()
    } catch {
        print("speech bench failed: \(error)")
    }
}

private struct SpeechBenchSettings {
    var quick = false
    var sessions = 4
    var chunk = 320
    var repeats = 3
    var extraOptionSets: [[String]] = []
    var extraFiles: [String] = []
    var only: String?
}

private struct BenchFile {
    let path: String
    let name: String
    let samples: [Int16]
    let reference: String?
    var seconds: Double { Double(samples.count) / 16000 }
}

private struct SpeechBench {
    let settings: SpeechBenchSettings
    let testData = "/usr/share/pocketsphinx/test/data"
    /// pocketsphinx's own defaults (no extra arguments), as the CLI runs.
    let model = PocketSphinxConfiguration(arguments: [])

    func run() throws {
        let referenced = try loadReferenced()
        var speedFiles = referenced
        if let beckett = try? BenchWAV.load("Tests/StenoSpeechTests/Resources/beckett.wav", name: "beckett.wav", reference: nil) {
            speedFiles.append(beckett)
        }
        for path in settings.extraFiles {
            speedFiles.append(try BenchWAV.load(path, name: (path as NSString).lastPathComponent, reference: nil))
        }
        print("speech benchmark: pocketsphinx 5prealpha, model \(model.modelDirectory), \(settings.chunk)-sample chunks, best of \(settings.repeats)")
        print("speed and memory with pocketsphinx's default options, as the CLI runs")
        if settings.only == nil || settings.only == "speed" {
            print("")
            try speed(speedFiles)
        }
        if settings.only == nil || settings.only == "memory" {
            print("")
            try memoryAndStartup()
        }
        if settings.only == nil || settings.only == "options" {
            print("")
            var withBeckett = referenced
            if let beckett = try? BenchWAV.load("Tests/StenoSpeechTests/Resources/beckett.wav", name: "beckett",
                                                reference: "ever tried ever failed no matter try again fail again fail better") {
                withBeckett.append(beckett)
            }
            try options(withBeckett)
        }
    }

    // MARK: Speed

    private func speed(_ files: [BenchFile]) throws {
        let engine = try PocketSphinxEngine(configuration: model)
        let cliInit = (0..<settings.repeats).map { _ in (try? cli(silence: 0.1))?.cpu ?? .infinity }.min() ?? 0
        var rows: [[String]] = []
        var total = (audio: 0.0, steno: 0.0, quiet: 0.0, bare: 0.0, cli: 0.0)
        for file in files {
            var steno = Double.infinity
            var quiet = Double.infinity
            var bare = Double.infinity
            var theirs = Double.infinity
            var cliWords = ""
            var ourWords = ""
            // Interleaved, so that a busy moment on the machine hits all alike.
            for _ in 0..<settings.repeats {
                let run = try decode(file, engine: engine)
                steno = min(steno, run.cpu)
                ourWords = run.text
                quiet = min(quiet, try decode(file, engine: engine, partials: false).cpu)
                bare = min(bare, try bareLoop(file))
                let external = try cli(file.path)
                theirs = min(theirs, external.cpu - cliInit)
                cliWords = external.text
            }
            total.audio += file.seconds
            total.steno += steno
            total.quiet += quiet
            total.bare += bare
            total.cli += theirs
            rows.append([file.name, f(file.seconds, 2), f(steno / file.seconds, 3), f(quiet / file.seconds, 3),
                         f(bare / file.seconds, 3), f(theirs / file.seconds, 3),
                         f(steno / bare, 2), f(steno / theirs, 2), ourWords == cliWords ? "same" : "DIFFERENT"])
        }
        rows.append(["all", f(total.audio, 2), f(total.steno / total.audio, 3), f(total.quiet / total.audio, 3),
                     f(total.bare / total.audio, 3), f(total.cli / total.audio, 3),
                     f(total.steno / total.bare, 2), f(total.steno / total.cli, 2), ""])
        print("Real-time factor (CPU s per audio s): StenoSpeech streaming, the CLI's loop in-process, the CLI")
        print("(CLI: CPU of the run minus \(f(cliInit, 3)) s, its CPU on 0.1 s of silence, i.e. model loading)")
        table(["file", "audio s", "steno", "steno, no partials", "bare loop", "CLI", "steno/bare", "steno/CLI", "words vs CLI"], rows)
    }

    /// The loop of `pocketsphinx_continuous -infile`, straight on the C API, on a new decoder
    /// (made outside the timed part). Returns the CPU seconds of the decoding.
    private func bareLoop(_ file: BenchFile) throws -> Double {
        var argv: [UnsafeMutablePointer<CChar>?] = model.decoderArguments.map { strdup($0) }
        defer { for pointer in argv { free(pointer) } }
        guard let config = argv.withUnsafeMutableBufferPointer({ cmd_ln_parse_r(nil, ps_args(), Int32($0.count), $0.baseAddress, 1) }),
              let ps = ps_init(config) else {
            throw BenchError("ps_init failed")
        }
        defer {
            ps_free(ps)
            cmd_ln_free_r(config)
        }
        let start = threadCPU()
        file.samples.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            ps_start_utt(ps)
            var started = false
            var offset = 0
            while offset < buffer.count {
                let count = min(2048, buffer.count - offset)
                ps_process_raw(ps, base + offset, count, 0, 0)
                offset += count
                let inSpeech = ps_get_in_speech(ps) != 0
                if inSpeech && !started { started = true }
                if !inSpeech && started {
                    ps_end_utt(ps)
                    _ = ps_get_hyp(ps, nil)
                    ps_start_utt(ps)
                    started = false
                }
            }
            ps_end_utt(ps)
            if started { _ = ps_get_hyp(ps, nil) }
        }
        return threadCPU() - start
    }

    /// `samples` into `recognizer`, `settings.chunk` at a time; the events it returned.
    private func feed(_ samples: [Float], to recognizer: PocketSphinxRecognizer) throws -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        var offset = 0
        try samples.withUnsafeBufferPointer { buffer in
            while offset < buffer.count {
                let end = min(buffer.count, offset + settings.chunk)
                events += try recognizer.accept(UnsafeBufferPointer(rebasing: buffer[offset..<end]))
                offset = end
            }
        }
        return events
    }

    /// Decodes a file on a recognizer from `engine`, fed `settings.chunk` samples at a time.
    private func decode(_ file: BenchFile, engine: PocketSphinxEngine, partials: Bool = true) throws -> (cpu: Double, text: String, words: [Word]) {
        let recognizer = try engine.makePocketSphinxRecognizer(options: RecognizerOptions(partialResults: partials))
        let floats = file.samples.map { Float($0) / 32768 }
        let start = threadCPU()
        var events = try feed(floats, to: recognizer)
        events += try recognizer.finish()
        let cpu = threadCPU() - start
        let finals = events.compactMap { event -> RecognitionResult? in
            if case .final(let result) = event { return result } else { return nil }
        }
        return (cpu, finals.map(\.text).joined(separator: " "), finals.flatMap(\.words))
    }

    /// Runs the CLI under /usr/bin/time (GNU time: the child's own CPU and peak RSS; the
    /// parent's RUSAGE_CHILDREN peak RSS would count this process's RSS, which the child
    /// had before exec).
    private func cli(_ path: String, arguments extra: [String] = []) throws -> (cpu: Double, maxRSS: Int, text: String) {
        let usageFile = NSTemporaryDirectory() + "steno-bench-time-\(getpid()).txt"
        defer { try? FileManager.default.removeItem(atPath: usageFile) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/time")
        process.arguments = ["-f", "%U %S %M", "-o", usageFile, "/usr/bin/pocketsphinx_continuous",
                             "-infile", path, "-hmm", model.resolvedAcousticModel, "-lm", model.resolvedLanguageModel,
                             "-dict", model.resolvedDictionary, "-logfn", "/dev/null"] + extra
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let fields = ((try? String(contentsOfFile: usageFile, encoding: .utf8)) ?? "")
            .split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Double($0) }
        guard process.terminationStatus == 0, fields.count == 3 else {
            throw BenchError("pocketsphinx_continuous (under /usr/bin/time) failed on \(path)")
        }
        let text = String(decoding: data, as: UTF8.self).split(separator: "\n").filter { !$0.isEmpty }.joined(separator: " ")
        return (fields[0] + fields[1], Int(fields[2]), text)
    }

    private func cli(silence seconds: Double) throws -> (cpu: Double, maxRSS: Int, text: String) {
        let path = NSTemporaryDirectory() + "steno-bench-silence-\(getpid()).wav"
        try BenchWAV.write([Int16](repeating: 0, count: Int(seconds * 16000)), to: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try cli(path)
    }

    // MARK: Memory, start-up

    private func memoryAndStartup() throws {
        let before = residentBytes()
        var start = monotonic()
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: settings.sessions))
        let firstDecoder = monotonic() - start
        let withOne = residentBytes()
        var sessions: [PocketSphinxRecognizer] = []
        var made: [Double] = []
        for _ in 0..<settings.sessions {
            let idleBefore = engine.idleDecoders
            start = monotonic()
            sessions.append(try engine.makePocketSphinxRecognizer())
            if idleBefore == 0 { made.append(monotonic() - start) }
        }
        // Give every session a second of speech so that search structures are in use.
        let speech = try BenchWAV.load("\(testData)/cards/001.wav", name: "001", reference: nil)
        let floats = speech.samples.map { Float($0) / 32768 }
        for session in sessions { _ = try session.accept(floats) }
        let withAll = residentBytes()
        for session in sessions { _ = try session.finish() }
        sessions.removeAll()
        // Sessions on pooled decoders: reset + start.
        var pooled: [Double] = []
        for _ in 0..<10 {
            start = monotonic()
            let session = try engine.makePocketSphinxRecognizer()
            pooled.append(monotonic() - start)
            session.cancel()
        }
        let detectorStart = monotonic()
        let detector = try engine.makeSpeechDetector()
        let detectorTime = monotonic() - detectorStart
        let detectorCPU0 = threadCPU()
        for _ in 0..<10 { _ = detector.accept(floats) }
        _ = detector.finish()
        let detectorRTF = (threadCPU() - detectorCPU0) / (10 * speech.seconds)

        let cliRun = try cli(silence: 0.1)
        let perSession = Double(withAll - withOne) / Double(max(1, settings.sessions - 1)) / 1_048_576
        print("Memory and start-up")
        let rows: [[String]] = [
            ["process RSS before the engine", "\(mb(before)) MB"],
            ["RSS with the engine (1 decoder)", "\(mb(withOne)) MB"],
            ["RSS with \(settings.sessions) sessions open", "\(mb(withAll)) MB"],
            ["RSS per extra session (own decoder)", f(perSession, 1) + " MB"],
            ["pocketsphinx_continuous peak RSS", "\(cliRun.maxRSS / 1024) MB"],
            ["first decoder (engine init), wall", f(firstDecoder, 3) + " s"],
            ["new decoder for a session, wall (median)", made.isEmpty ? "-" : f(median(made), 3) + " s"],
            ["session on a pooled decoder (reset+start), median", f(median(pooled) * 1000, 3) + " ms"],
            ["standalone speech detector: make", f(detectorTime * 1000, 3) + " ms"],
            ["standalone speech detector: RTF", f(detectorRTF, 4)],
            ["decoders made by the engine", "\(engine.decodersMade)"],
        ]
        table(["what", "value"], rows)
    }

    // MARK: Options, WER, confidences

    private func options(_ files: [BenchFile]) throws {
        var sets: [[String]] = [
            [],
            ["-maxhmmpf", "3000", "-maxwpf", "10"],
            PocketSphinxConfiguration.recommendedArguments,
        ]
        if !settings.quick {
            sets += [
                ["-maxhmmpf", "10000"],
                ["-fwdflat", "no"],
                ["-maxhmmpf", "5000", "-maxwpf", "20", "-fwdflat", "no"],
                ["-topn", "2"],
                ["-beam", "1e-40", "-wbeam", "1e-20"],
            ]
        }
        sets += settings.extraOptionSets
        let engines = try sets.map { try PocketSphinxEngine(configuration: PocketSphinxConfiguration(arguments: $0)) }
        let groups = ["librivox", "cards", "beckett"]
        let referenced = files.filter { $0.reference != nil }

        // Fresh sessions, interleaved: for each file and repeat, every option set in turn, so
        // that the machine's load hits all sets alike; the best CPU time counts.
        var cpu = [[Double]](repeating: [Double](repeating: .infinity, count: referenced.count), count: sets.count)
        var hypotheses = [[[Word]]](repeating: [[Word]](repeating: [], count: referenced.count), count: sets.count)
        for (fileIndex, file) in referenced.enumerated() {
            for repeatIndex in 0..<settings.repeats {
                for setIndex in sets.indices {
                    let run = try decode(file, engine: engines[setIndex])
                    cpu[setIndex][fileIndex] = min(cpu[setIndex][fileIndex], run.cpu)
                    if repeatIndex == 0 { hypotheses[setIndex][fileIndex] = run.words }
                }
            }
        }

        var rows: [[String]] = []
        var calibration: [Word] = []
        var correctness: [Bool] = []
        let audio = referenced.reduce(0) { $0 + $1.seconds }
        for setIndex in sets.indices {
            var row = [sets[setIndex].isEmpty ? "(pocketsphinx defaults)" : sets[setIndex].joined(separator: " ")
                + (sets[setIndex] == PocketSphinxConfiguration.recommendedArguments ? " (Steno default)" : "")]
            for group in groups {
                var errors = 0
                var count = 0
                for (fileIndex, file) in referenced.enumerated() where file.name.hasPrefix(group) {
                    let alignment = align(reference: words(file.reference ?? ""), hypothesis: hypotheses[setIndex][fileIndex].map(\.text))
                    errors += alignment.errors
                    count += alignment.referenceCount
                    if setIndex == 0 {
                        calibration += hypotheses[setIndex][fileIndex]
                        correctness += alignment.hypothesisCorrect
                    }
                }
                row.append(pct(errors, count))
                // One session for the whole group, finalized after each file (WER only).
                let members = referenced.filter { $0.name.hasPrefix(group) }
                guard members.count > 1 else { continue }
                let session = try decodeInOneSession(members, engine: engines[setIndex])
                var sessionErrors = 0
                var sessionCount = 0
                for (file, hypothesis) in zip(members, session.perFile) {
                    let alignment = align(reference: words(file.reference ?? ""), hypothesis: hypothesis)
                    sessionErrors += alignment.errors
                    sessionCount += alignment.referenceCount
                }
                row.append(pct(sessionErrors, sessionCount))
            }
            let total = cpu[setIndex].reduce(0, +)
            row.append(f(total / audio, 3))
            row.append(f(total / cpu[0].reduce(0, +), 2))
            rows.append(row)
        }
        print("Decoder options: word error rate (substitutions + deletions + insertions / reference words) and RTF")
        print("fresh: each file in a new session (its first utterance uses the model's initial cepstral mean);")
        print("1 session: the group's files one after another in one session, finalized after each file.")
        print("RTF: fresh sessions, best of \(settings.repeats) interleaved runs, all files")
        let counts = groups.map { group in referenced.filter { $0.name.hasPrefix(group) }.reduce(0) { $0 + words($1.reference ?? "").count } }
        print("reference words: " + zip(groups, counts).map { "\($0) \($1) (1 word = \(f(100 / Double(max(1, $1)), 1)) points)" }.joined(separator: ", "))
        table(["options", "librivox fresh", "librivox 1 session", "cards fresh", "cards 1 session", "beckett", "RTF", "CPU vs defaults"], rows)
        print("")
        calibrationTable(calibration, correctness)
    }

    /// Decodes files one after another in one session, `endUtterance()` after each; returns
    /// each file's words.
    private func decodeInOneSession(_ files: [BenchFile], engine: PocketSphinxEngine) throws -> (cpu: Double, perFile: [[String]]) {
        let recognizer = try engine.makePocketSphinxRecognizer()
        var perFile: [[String]] = []
        let start = threadCPU()
        for file in files {
            var events = try feed(file.samples.map { Float($0) / 32768 }, to: recognizer)
            events += try recognizer.endUtterance()
            perFile.append(events.flatMap { event -> [String] in
                if case .final(let result) = event { return result.words.map(\.text) } else { return [] }
            })
        }
        _ = try recognizer.finish()
        return (threadCPU() - start, perFile)
    }

    /// How well confidences (word posteriors) separate right from wrong words (defaults).
    private func calibrationTable(_ words: [Word], _ correct: [Bool]) {
        guard words.count == correct.count, !words.isEmpty else { return }
        let bands: [(String, ClosedRange<Double>)] = [
            ("0.00-0.25", 0...0.25), ("0.25-0.50", 0.25...0.5), ("0.50-0.75", 0.5...0.75), ("0.75-1.00", 0.75...1),
        ]
        var rows: [[String]] = []
        var seen = Set<Int>()
        for (label, band) in bands {
            var total = 0
            var right = 0
            for (index, word) in words.enumerated() where band.contains(word.confidence) && !seen.contains(index) {
                seen.insert(index)
                total += 1
                if correct[index] { right += 1 }
            }
            rows.append([label, "\(total)", total == 0 ? "-" : pct(right, total)])
        }
        let rightMean = zip(words, correct).filter { $0.1 }.map(\.0.confidence)
        let wrongMean = zip(words, correct).filter { !$0.1 }.map(\.0.confidence)
        print("Confidence (ps_seg_prob posterior) against correctness, defaults, fresh sessions, all referenced files")
        table(["confidence", "words", "correct"], rows)
        print("mean confidence: correct words \(f(mean(rightMean), 3)) (\(rightMean.count)), wrong words \(f(mean(wrongMean), 3)) (\(wrongMean.count))")
    }

    // MARK: Files

    private func loadReferenced() throws -> [BenchFile] {
        var files: [BenchFile] = []
        let librivoxRefs = try references("\(testData)/librivox/transcription")
        for id in librivoxRefs.keys.sorted() {
            files.append(try BenchWAV.load("\(testData)/librivox/\(id).wav", name: "librivox/\(id.suffix(4))", reference: librivoxRefs[id]))
        }
        let cardRefs = try references("\(testData)/cards/cards.transcription")
        for id in cardRefs.keys.sorted() {
            files.append(try BenchWAV.load("\(testData)/cards/\(id).wav", name: "cards/\(id)", reference: cardRefs[id]))
        }
        return files
    }

    /// `<s> words </s> (id)` lines → id: words.
    private func references(_ path: String) throws -> [String: String] {
        var result: [String: String] = [:]
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            guard let open = line.lastIndex(of: "("), let close = line.lastIndex(of: ")"), open < close else { continue }
            let id = String(line[line.index(after: open)..<close])
            result[id] = String(line[..<open])
        }
        return result
    }

    private func words(_ text: String) -> [String] {
        text.lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" })
            .map(String.init).filter { $0 != "<s>" && $0 != "</s>" && $0 != "<sil>" }
    }
}

// MARK: - Word alignment

struct Alignment {
    var errors: Int
    var referenceCount: Int
    /// For each hypothesis word: whether it matched the reference word it was aligned with.
    var hypothesisCorrect: [Bool]
}

/// Levenshtein alignment of word sequences, with a backtrace to mark correct hypothesis words.
func align(reference: [String], hypothesis: [String]) -> Alignment {
    let n = reference.count
    let m = hypothesis.count
    var cost = [[Int]](repeating: [Int](repeating: 0, count: m + 1), count: n + 1)
    for i in 0...n { cost[i][0] = i }
    for j in 0...m { cost[0][j] = j }
    if n > 0 && m > 0 {
        for i in 1...n {
            for j in 1...m {
                let substitution = cost[i - 1][j - 1] + (reference[i - 1] == hypothesis[j - 1] ? 0 : 1)
                cost[i][j] = min(substitution, cost[i - 1][j] + 1, cost[i][j - 1] + 1)
            }
        }
    }
    var correct = [Bool](repeating: false, count: m)
    var i = n
    var j = m
    while i > 0 && j > 0 {
        let same = reference[i - 1] == hypothesis[j - 1]
        if cost[i][j] == cost[i - 1][j - 1] + (same ? 0 : 1) {
            correct[j - 1] = same
            i -= 1
            j -= 1
        } else if cost[i][j] == cost[i - 1][j] + 1 {
            i -= 1
        } else {
            j -= 1
        }
    }
    return Alignment(errors: cost[n][m], referenceCount: n, hypothesisCorrect: correct)
}

// MARK: - WAV files

private enum BenchWAV {
    /// 16-bit PCM mono 16 kHz RIFF/WAVE.
    static func load(_ path: String, name: String, reference: String?) throws -> BenchFile {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func u32(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24 }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        guard bytes.count >= 12, bytes[0..<4] == [0x52, 0x49, 0x46, 0x46] else { throw BenchError("\(path): not a WAV file") }
        var offset = 12
        var format: (rate: Int, channels: Int, bits: Int)?
        while offset + 8 <= bytes.count {
            let id = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
            let size = u32(offset + 4)
            let body = offset + 8
            guard body + size <= bytes.count else { throw BenchError("\(path): truncated") }
            if id == "fmt " && size >= 16 {
                format = (u32(body + 4), u16(body + 2), u16(body + 14))
            } else if id == "data" {
                guard let format, format == (16000, 1, 16) else { throw BenchError("\(path): need 16-bit mono 16 kHz") }
                let samples = (0..<size / 2).map { Int16(bitPattern: UInt16(bytes[body + 2 * $0]) | UInt16(bytes[body + 2 * $0 + 1]) << 8) }
                return BenchFile(path: path, name: name, samples: samples, reference: reference)
            }
            offset = body + size + (size & 1)
        }
        throw BenchError("\(path): no data")
    }

    static func write(_ samples: [Int16], to path: String) throws {
        var data = Data()
        func put32(_ value: Int) { withUnsafeBytes(of: UInt32(value).littleEndian) { data.append(contentsOf: $0) } }
        func put16(_ value: Int) { withUnsafeBytes(of: UInt16(value).littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: Array("RIFF".utf8)); put32(36 + 2 * samples.count)
        data.append(contentsOf: Array("WAVEfmt ".utf8)); put32(16); put16(1); put16(1); put32(16000); put32(32000); put16(2); put16(16)
        data.append(contentsOf: Array("data".utf8)); put32(2 * samples.count)
        for sample in samples { put16(Int(UInt16(bitPattern: sample))) }
        try data.write(to: URL(fileURLWithPath: path))
    }
}

private struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Measuring

private func threadCPU() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

private func monotonic() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// This process's resident set size, from /proc/self/statm.
private func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

// MARK: - Printing

private func table(_ header: [String], _ rows: [[String]]) {
    let all = [header] + rows
    let widths = header.indices.map { column in all.map { $0.indices.contains(column) ? $0[column].count : 0 }.max() ?? 0 }
    func line(_ cells: [String]) -> String {
        cells.enumerated().map { index, cell in
            let pad = String(repeating: " ", count: max(0, widths[index] - cell.count))
            return index == 0 ? cell + pad : pad + cell
        }.joined(separator: "  ")
    }
    print(line(header))
    print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
    for row in rows { print(line(row)) }
}

private func f(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }
private func pct(_ part: Int, _ whole: Int) -> String { whole == 0 ? "-" : String(format: "%.1f %%", 100 * Double(part) / Double(whole)) }
private func mb(_ bytes: Int) -> Int { bytes / 1_048_576 }
private func mean(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count) }
private func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}
