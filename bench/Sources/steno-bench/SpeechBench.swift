// The speech benchmark: what a pocketsphinx session costs and how well it recognizes.
//
//   steno-bench speech [--quick] [--one-session] [--only speed|memory|options] [--sessions N] [--chunk SAMPLES]
//                      [--repeat N] [--options "ARGS" ...] [--files-only] [WAV...]
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
// 3. Decoder options, over every labelled file there is (bench/speech/README.md): per option
//    set (pocketsphinx's defaults, Steno's — `PocketSphinxConfiguration.recommendedArguments`,
//    whatever they are — and Steno's with the second pass or the lattice on or off, other
//    pruning; add your own with --options "-name value ..."), the word error rate per group of
//    files and overall (fresh sessions; --one-session: also each group in one session), the words changed on
//    the files without a reference, the real-time factor and CPU against the defaults, the
//    end-of-utterance time (wall time of the call that delivered each final, less the block
//    of audio it analyzed: p50, p95, max), and how well confidences separate right from
//    wrong words.
//
// Files: Debian's pocketsphinx-testdata (librivox/, cards/, goforward.raw, tidigits/dhd.2934z.raw,
// numbers.raw, something.raw), bench/phrases/tts, bench/speech and
// Tests/StenoSpeechTests/Resources/beckett.wav (run from the package root); extra WAV paths
// (16-bit mono 16 kHz) are added to the speed table; with --files-only the speed table has those
// alone (e.g. one file under callgrind: `--only speed --repeat 1 --files-only beckett.wav`).
// --quick uses fewer option sets; --one-session adds the options table's WER with each group's
// files in one session (deterministic, so one run of it is enough). Timings on a shared 2-core
// machine are noisy: each figure is the best of --repeat runs (default 3).
// It takes a while (on a quiet machine, about 6 min for the speed table, well under 1 min for
// memory, several minutes for the options): the speed table prints each file's row when it is
// done, and the options part says on standard error which file it is at.

import CPocketSphinx
import Foundation
import StenoCore
import StenoSession
import StenoSpeech
import StenoSystem

func runSpeechBench(_ arguments: [String]) {
    var settings = SpeechBenchSettings()
    var index = 0
    while index < arguments.count {
        let argument = arguments[index]
        let value = index + 1 < arguments.count ? arguments[index + 1] : nil
        switch (argument, value) {
        case ("--quick", _): settings.quick = true
        case ("--one-session", _): settings.oneSession = true
        case ("--files-only", _): settings.filesOnly = true
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
    /// The options table also gives each group's WER with its files in one session.
    var oneSession = false
    var sessions = 4
    var chunk = 320
    var repeats = 3
    var extraOptionSets: [[String]] = []
    var extraFiles: [String] = []
    /// The speed table has `extraFiles` alone.
    var filesOnly = false
    var only: String?
}

private struct BenchFile {
    let path: String
    let name: String
    let samples: [Int16]
    let reference: String?
    /// The options table's subset (librivox, cards, …); "" elsewhere.
    var group = ""
    var seconds: Double { Double(samples.count) / 16000 }
}

private struct SpeechBench {
    let settings: SpeechBenchSettings
    let testData = "/usr/share/pocketsphinx/test/data"
    /// pocketsphinx's own defaults (no extra arguments), as the CLI runs.
    let model = PocketSphinxConfiguration(arguments: [])

    func run() throws {
        let referenced = try loadReferenced()
        var speedFiles = settings.filesOnly ? [] : referenced
        if !settings.filesOnly,
           let beckett = try? BenchWAV.load("Tests/StenoSpeechTests/Resources/beckett.wav", name: "beckett.wav", reference: nil) {
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
            try options(try loadOptionsSet())
        }
    }

    // MARK: Speed

    private func speed(_ files: [BenchFile]) throws {
        let engine = try PocketSphinxEngine(configuration: model)
        let cliInit = (0..<settings.repeats).map { _ in (try? cli(silence: 0.1))?.cpu ?? .infinity }.min() ?? 0
        print("Real-time factor (CPU s per audio s): StenoSpeech streaming, the CLI's loop in-process, the CLI")
        print("(CLI: CPU of the run minus \(f(cliInit, 3)) s, its CPU on 0.1 s of silence, i.e. model loading)")
        // A row as each file is done: the table takes minutes.
        let rows = RowPrinter(["file", "audio s", "steno", "steno, no partials", "bare loop", "CLI", "steno/bare", "steno/CLI", "words vs CLI"],
                              firstColumn: files.map(\.name) + ["all"])
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
            rows.print([file.name, f(file.seconds, 2), f(steno / file.seconds, 3), f(quiet / file.seconds, 3),
                        f(bare / file.seconds, 3), f(theirs / file.seconds, 3),
                        f(steno / bare, 2), f(steno / theirs, 2), ourWords == cliWords ? "same" : "DIFFERENT"])
        }
        rows.print(["all", f(total.audio, 2), f(total.steno / total.audio, 3), f(total.quiet / total.audio, 3),
                    f(total.bare / total.audio, 3), f(total.cli / total.audio, 3),
                    f(total.steno / total.bare, 2), f(total.steno / total.cli, 2), ""])
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

    /// Runs the CLI under /usr/bin/time (GNU time: the child's own CPU and peak RSS; its
    /// `wait4` here would give a peak RSS that counts this process's, which a child spawned
    /// with a shared address space (posix_spawn) has until it execs).
    private func cli(_ path: String, arguments extra: [String] = []) throws -> (cpu: Double, maxRSS: Int, text: String) {
        let usageFile = NSTemporaryDirectory() + "steno-bench-time-\(getpid()).txt"
        defer { try? FileManager.default.removeItem(atPath: usageFile) }
        let run = try runChild("/usr/bin/time", ["-f", "%U %S %M", "-o", usageFile, "/usr/bin/pocketsphinx_continuous",
                                                 "-infile", path, "-hmm", model.resolvedAcousticModel, "-lm", model.resolvedLanguageModel,
                                                 "-dict", model.resolvedDictionary, "-logfn", "/dev/null"] + extra)
        let fields = ((try? String(contentsOfFile: usageFile, encoding: .utf8)) ?? "")
            .split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Double($0) }
        guard run.status == 0, fields.count == 3 else {
            throw BenchError("pocketsphinx_continuous (under /usr/bin/time) failed on \(path) (exit status \(run.status))")
        }
        let text = run.stdout.split(separator: "\n").filter { !$0.isEmpty }.joined(separator: " ")
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

    // MARK: Options: WER, CPU, the end-of-utterance tail, confidences

    /// One row of the options tables: the decoder arguments and what the row is called.
    private struct DecoderOptions {
        let label: String
        let arguments: [String]
    }

    /// The option sets compared: pocketsphinx's defaults, Steno's (second: the calibration
    /// table is Steno's), Steno's with the second pass (`-fwdflat`) and the lattice
    /// (`-bestpath`) on or off, pocketsphinx's with other pruning, then `--options`. Steno's
    /// options are `recommendedArguments` whatever they are, and a row is labelled by how it
    /// differs from them, so the rows follow a change of the default; a set that decodes as
    /// an earlier one (the same value of every option, given or by default) is left out.
    private func optionSets() -> [DecoderOptions] {
        let steno = PocketSphinxConfiguration.recommendedArguments
        var candidates = [DecoderOptions(label: "(pocketsphinx defaults)", arguments: []),
                          DecoderOptions(label: "Steno default: " + steno.joined(separator: " "), arguments: steno)]
        var changes = [["-fwdflat", "no"], ["-fwdflat", "yes"]]
        if !settings.quick {
            changes += [["-bestpath", "no"], ["-fwdflat", "no", "-bestpath", "no"], ["-fwdflat", "yes", "-bestpath", "no"]]
        }
        candidates += changes.map { DecoderOptions(label: "Steno, " + $0.joined(separator: " "), arguments: PocketSphinxConfiguration.arguments(steno, setting: $0)) }
        if !settings.quick {
            candidates += [["-fwdflat", "no"], ["-maxhmmpf", "3000", "-maxwpf", "10", "-fwdflat", "no"],
                           ["-maxhmmpf", "10000", "-maxwpf", "20", "-fwdflat", "no"]]
                .map { DecoderOptions(label: $0.joined(separator: " "), arguments: $0) }
        }
        candidates += settings.extraOptionSets.map { DecoderOptions(label: $0.joined(separator: " "), arguments: $0) }
        let defaults = pocketSphinxDefaults()
        var seen: [[String: String]] = []
        return candidates.filter { candidate in
            let effective = defaults.merging(pairs(candidate.arguments)) { $1 }
            if seen.contains(effective) { return false }
            seen.append(effective)
            return true
        }
    }

    /// `-name value` pairs as a dictionary.
    private func pairs(_ arguments: [String]) -> [String: String] {
        var result: [String: String] = [:]
        for index in stride(from: 0, to: arguments.count - 1, by: 2) { result[arguments[index]] = arguments[index + 1] }
        return result
    }

    /// Every decoder option's default value, as pocketsphinx declares it (`ps_args()`).
    private func pocketSphinxDefaults() -> [String: String] {
        var result: [String: String] = [:]
        guard var argument = ps_args() else { return result }
        while let name = argument.pointee.name {
            if let value = argument.pointee.deflt { result[String(cString: name)] = String(cString: value) }
            argument += 1
        }
        return result
    }

    private func options(_ files: [BenchFile]) throws {
        let sets = optionSets()
        progress("options: \(sets.count) option sets: " + sets.map(\.label).joined(separator: "; "))
        let engines = try sets.map { try PocketSphinxEngine(configuration: PocketSphinxConfiguration(arguments: $0.arguments)) }
        let block = PocketSphinxConfiguration().blockSamples
        let groups = files.map(\.group).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        let scored = groups.filter { group in files.contains { $0.group == group && $0.reference != nil } }

        // Fresh sessions, interleaved: for each file and repeat, every option set in turn, so
        // that the machine's load hits all sets alike; per file the least CPU counts, and per
        // call (the same calls every run: the words do not change) the least wall time.
        var cpu = [[Double]](repeating: [Double](repeating: .infinity, count: files.count), count: sets.count)
        var hypotheses = [[[Word]]](repeating: [[Word]](repeating: [], count: files.count), count: sets.count)
        var calls = [[[Call]]](repeating: [[Call]](repeating: [], count: files.count), count: sets.count)
        for (fileIndex, file) in files.enumerated() {
            // Progress, on standard error so that the tables stay as they are.
            progress("options: file \(fileIndex + 1) of \(files.count), \(file.name): \(sets.count) option sets × \(settings.repeats) runs")
            for repeatIndex in 0..<settings.repeats {
                for setIndex in sets.indices {
                    let run = try decodeTimed(file, engine: engines[setIndex], block: block)
                    cpu[setIndex][fileIndex] = min(cpu[setIndex][fileIndex], run.cpu)
                    if repeatIndex == 0 {
                        hypotheses[setIndex][fileIndex] = run.words
                        calls[setIndex][fileIndex] = run.calls
                    } else if run.calls.count == calls[setIndex][fileIndex].count {
                        for (index, call) in run.calls.enumerated() {
                            calls[setIndex][fileIndex][index].wall = min(calls[setIndex][fileIndex][index].wall, call.wall)
                            calls[setIndex][fileIndex][index].cpu = min(calls[setIndex][fileIndex][index].cpu, call.cpu)
                        }
                    }
                }
            }
        }

        let audio = files.reduce(0) { $0 + $1.seconds }
        print("Decoder options over \(files.count) files, \(f(audio, 1)) s of audio; fresh session per file, fed a \(block)-sample block per call")
        for group in groups {
            let members = files.filter { $0.group == group }
            let count = members.reduce(0) { $0 + words($1.reference ?? "").count }
            print("  \(group): \(members.count) files, \(f(members.reduce(0) { $0 + $1.seconds }, 1)) s"
                  + (count > 0 ? ", \(count) reference words (1 word = \(f(100 / Double(count), 1)) points)" : ", no reference"))
        }

        // Accuracy: deterministic, so the first run's words.
        var accuracyRows: [[String]] = []
        var calibration: (words: [Word], correct: [Bool]) = ([], [])
        let stenoIndex = sets.firstIndex { $0.arguments == PocketSphinxConfiguration.recommendedArguments } ?? 1
        var separation: [String] = []
        for setIndex in sets.indices {
            var row = [sets[setIndex].label]
            var all = (errors: 0, count: 0)
            var right: [Double] = []
            var wrong: [Double] = []
            for group in scored {
                var sum = (errors: 0, count: 0)
                for (fileIndex, file) in files.enumerated() where file.group == group {
                    guard let reference = file.reference else { continue }
                    let hypothesis = hypotheses[setIndex][fileIndex]
                    let alignment = align(reference: words(reference), hypothesis: hypothesis.map(\.text))
                    sum.errors += alignment.errors
                    sum.count += alignment.referenceCount
                    for (word, correct) in zip(hypothesis, alignment.hypothesisCorrect) {
                        if correct { right.append(word.confidence) } else { wrong.append(word.confidence) }
                    }
                    if setIndex == stenoIndex {
                        calibration.words += hypothesis
                        calibration.correct += alignment.hypothesisCorrect
                    }
                }
                row.append(pct(sum.errors, sum.count))
                all.errors += sum.errors
                all.count += sum.count
            }
            row.append("\(pct(all.errors, all.count)) (\(all.errors)/\(all.count))")
            if settings.oneSession {
                // Each group's files one after another in one session, as a live session
                // hears utterances (its cepstral mean carries over).
                var session = (errors: 0, count: 0)
                for group in scored {
                    let members = files.filter { $0.group == group && $0.reference != nil }
                    let perFile = try decodeInOneSession(members, engine: engines[setIndex]).perFile
                    for (file, hypothesis) in zip(members, perFile) {
                        let alignment = align(reference: words(file.reference ?? ""), hypothesis: hypothesis)
                        session.errors += alignment.errors
                        session.count += alignment.referenceCount
                    }
                }
                row.append("\(pct(session.errors, session.count)) (\(session.errors))")
            }
            // The files without a reference: words changed against pocketsphinx's defaults.
            var changed = (errors: 0, count: 0)
            for (fileIndex, file) in files.enumerated() where file.reference == nil {
                let alignment = align(reference: hypotheses[0][fileIndex].map(\.text), hypothesis: hypotheses[setIndex][fileIndex].map(\.text))
                changed.errors += alignment.errors
                changed.count += alignment.referenceCount
            }
            row.append(changed.count == 0 ? "-" : "\(changed.errors) of \(changed.count)")
            accuracyRows.append(row)
            separation.append(f(areaUnderCurve(right: right, wrong: wrong), 2))
        }

        // Cost: CPU, and the wall time of the calls that delivered a final, less the analysis
        // of the audio the call brought (the set's median wall time of a call that analyzed a
        // whole block and delivered no final): the end-of-utterance work (`ps_end_utt` with
        // the second pass, the lattice and best path, word posteriors), as a session waits for it.
        var costRows: [[String]] = []
        let defaultCPU = cpu[0].reduce(0, +)
        for setIndex in sets.indices {
            let all = calls[setIndex].flatMap { $0 }
            let blocks = all.filter { !$0.final && $0.samples == block }
            let blockWall = median(blocks.map(\.wall))
            let blockCPU = median(blocks.map(\.cpu))
            let finals = all.filter(\.final)
            let tails = finals.map { max(0, $0.wall - blockWall * Double($0.samples) / Double(block)) }.sorted()
            let tailsCPU = finals.map { max(0, $0.cpu - blockCPU * Double($0.samples) / Double(block)) }.sorted()
            let total = cpu[setIndex].reduce(0, +)
            costRows.append([sets[setIndex].label, f(total / audio, 3), f(total / defaultCPU, 2),
                             f(blockWall * 1000, 1), "\(tails.count)", ms(percentile(tails, 0.5)),
                             ms(percentile(tails, 0.95)), ms(tails.last ?? 0),
                             ms(percentile(tailsCPU, 0.5)), ms(percentile(tailsCPU, 0.95)), ms(tailsCPU.last ?? 0),
                             separation[setIndex]])
        }
        print("")
        print("Word error rate (substitutions + deletions + insertions / reference words), fresh sessions;")
        if settings.oneSession { print("1 session: each group's files in one session, finalized after each") }
        print("unreferenced: words changed against pocketsphinx's defaults, of their words")
        var header = ["options"] + scored + ["all"]
        if settings.oneSession { header.append("all, 1 session") }
        header.append("unreferenced")
        table(header, accuracyRows)
        print("")
        print("Cost: RTF and CPU over all files, best of \(settings.repeats) interleaved runs; end of utterance: wall time of the call")
        print("that delivered each final less its audio's share of a block call (best of \(settings.repeats) per call); conf AUC: how")
        print("often a right word's confidence beats a wrong word's (0.5: no better than chance)")
        print("(end CPU: the same, in the calls' thread CPU time)")
        table(["options", "RTF", "CPU vs defaults", "block call ms", "finals", "end p50", "end p95", "end max",
               "end CPU p50", "CPU p95", "CPU max", "conf AUC"], costRows)
        print("")
        calibrationTable(calibration.words, calibration.correct)
    }

    /// One recognizer call of `decodeTimed`: its wall and thread CPU time, the samples it
    /// analyzed, whether it delivered a final.
    private struct Call {
        var wall: Double
        var cpu: Double
        var samples: Int
        var final: Bool
    }

    /// Decodes a file on a new recognizer (partial results on, as sessions run), `block`
    /// samples per `accept` so that every call analyzes one block, the recognizer's unit of
    /// work, then `finish()`; times each call. The timing is the bench's, around the public API.
    private func decodeTimed(_ file: BenchFile, engine: PocketSphinxEngine, block: Int) throws -> (cpu: Double, words: [Word], calls: [Call]) {
        let recognizer = try engine.makePocketSphinxRecognizer()
        let floats = file.samples.map { Float($0) / 32768 }
        var calls: [Call] = []
        calls.reserveCapacity(floats.count / block + 2)
        var words: [Word] = []
        func timed(_ body: () throws -> [TranscriberEvent]) rethrows {
            let analyzed = recognizer.analyzedSeconds
            let start = monotonic()
            let startCPU = threadCPU()
            let events = try body()
            let cpu = threadCPU() - startCPU
            let wall = monotonic() - start
            let finals = events.compactMap { event -> RecognitionResult? in
                if case .final(let result) = event { return result } else { return nil }
            }
            words += finals.flatMap(\.words)
            let samples = Int(((recognizer.analyzedSeconds - analyzed) * 16000).rounded())
            calls.append(Call(wall: wall, cpu: cpu, samples: samples, final: !finals.isEmpty))
        }
        let start = threadCPU()
        try floats.withUnsafeBufferPointer { buffer in
            var offset = 0
            while offset < buffer.count {
                let end = min(buffer.count, offset + block)
                try timed { try recognizer.accept(UnsafeBufferPointer(rebasing: buffer[offset..<end])) }
                offset = end
            }
        }
        try timed { try recognizer.finish() }
        return (threadCPU() - start, words, calls)
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

    /// How well confidences (word posteriors) separate right from wrong words (Steno's default).
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
        print("Confidence (ps_seg_prob posterior) against correctness, Steno's default, fresh sessions, all referenced files")
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

    /// The options table's set (bench/speech/README.md says where each file and reference
    /// comes from): every audio file of pocketsphinx-testdata with a reference, the shared
    /// recordings, the synthetic sentences; and the package's two raw files and the Endgame
    /// dialogue, which have none. Run from the package root.
    private func loadOptionsSet() throws -> [BenchFile] {
        func grouped(_ group: String, _ file: BenchFile) -> BenchFile {
            var file = file
            file.group = group
            return file
        }
        var files = try loadReferenced().map { grouped($0.name.hasPrefix("cards") ? "cards" : "librivox", $0) }
        let ours = try references("bench/speech/transcription")
        for (path, id) in [("\(testData)/goforward.raw", "goforward"), ("\(testData)/tidigits/dhd.2934z.raw", "dhd.2934z")] {
            files.append(grouped("commands", try BenchRaw.load(path, name: id, reference: ours[id])))
        }
        let tts = try references("bench/phrases/tts/transcription")
        for id in tts.keys.sorted() {
            files.append(grouped("tts", try BenchWAV.load("bench/phrases/tts/\(id).wav", name: "tts/\(id)", reference: tts[id])))
        }
        files.append(grouped("beckett", try BenchWAV.load("Tests/StenoSpeechTests/Resources/beckett.wav", name: "beckett", reference: ours["beckett"])))
        for name in ["numbers", "something"] {
            files.append(grouped("unreferenced", try BenchRaw.load("\(testData)/\(name).raw", name: name, reference: nil)))
        }
        files.append(grouped("unreferenced", try BenchWAV.load("bench/speech/endgame_nagg_nell_16k.wav", name: "endgame", reference: nil)))
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

/// Headerless 16-bit little-endian mono 16 kHz PCM (pocketsphinx-testdata's `.raw` files).
private enum BenchRaw {
    static func load(_ path: String, name: String, reference: String?) throws -> BenchFile {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let samples = (0..<bytes.count / 2).map { Int16(bitPattern: UInt16(bytes[2 * $0]) | UInt16(bytes[2 * $0 + 1]) << 8) }
        return BenchFile(path: path, name: name, samples: samples, reference: reference)
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

/// Where a long part has got, on standard error (the tables on standard output stay as they are).
private func progress(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

private func table(_ header: [String], _ rows: [[String]]) {
    let all = [header] + rows
    let widths = header.indices.map { column in all.map { $0.indices.contains(column) ? $0[column].count : 0 }.max() ?? 0 }
    printHeader(header, widths)
    for row in rows { print(tableLine(row, widths)) }
}

/// A table printed a row at a time, for one that takes minutes: the first column is as wide
/// as the longest of `firstColumn` (the rows' names, known before), the others as their
/// header (numbers fit; a longer cell pushes its row's later cells right).
private struct RowPrinter {
    let widths: [Int]

    init(_ header: [String], firstColumn: [String]) {
        widths = [max(header[0].count, firstColumn.map(\.count).max() ?? 0)] + header.dropFirst().map { max($0.count, 5) }
        printHeader(header, widths)
    }

    func print(_ cells: [String]) { Swift.print(tableLine(cells, widths)) }
}

private func printHeader(_ header: [String], _ widths: [Int]) {
    print(tableLine(header, widths))
    print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
}

/// The first column left-aligned, the others right-aligned.
private func tableLine(_ cells: [String], _ widths: [Int]) -> String {
    cells.enumerated().map { index, cell in
        let pad = String(repeating: " ", count: max(0, (index < widths.count ? widths[index] : 0) - cell.count))
        return index == 0 ? cell + pad : pad + cell
    }.joined(separator: "  ")
}

private func f(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }
private func pct(_ part: Int, _ whole: Int) -> String { whole == 0 ? "-" : String(format: "%.1f %%", 100 * Double(part) / Double(whole)) }
private func mb(_ bytes: Int) -> Int { bytes / 1_048_576 }
private func mean(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count) }
private func ms(_ seconds: Double) -> String { String(format: "%.0f ms", seconds * 1000) }
/// The value below which a fraction `p` of the sorted `values` lie (nearest rank).
/// The chance that a right word's confidence is above a wrong word's (ties count half): the
/// area under the ROC curve of confidence as a right/wrong classifier.
private func areaUnderCurve(right: [Double], wrong: [Double]) -> Double {
    guard !right.isEmpty, !wrong.isEmpty else { return .nan }
    var wins = 0.0
    for r in right {
        for w in wrong { wins += r > w ? 1 : (r == w ? 0.5 : 0) }
    }
    return wins / Double(right.count * wrong.count)
}
private func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}
