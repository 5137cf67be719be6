// The speech benchmark: what a pocketsphinx session costs and how well it recognizes.
// (Whisper's counterparts: bench/whisper.py, the worker alone; bench/streaming.py, through
// `steno serve` beside the same model's batch floor. capacity, connections, viewers and latency
// take `--engine`; speech, server and phrases measure pocketsphinx's own decoders and options.)
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

struct SpeechBenchSettings {
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

struct BenchFile {
    let path: String
    let name: String
    let samples: [Int16]
    let reference: String?
    /// The options table's subset (librivox, cards, …); "" elsewhere.
    var group = ""
    var seconds: Double { Double(samples.count) / 16000 }
}

struct SpeechBench {
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

    func speed(_ files: [BenchFile]) throws {
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
    func bareLoop(_ file: BenchFile) throws -> Double {
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
    func feed(_ samples: [Float], to recognizer: PocketSphinxRecognizer) throws -> [TranscriberEvent] {
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
    func decode(_ file: BenchFile, engine: PocketSphinxEngine, partials: Bool = true) throws -> (cpu: Double, text: String, words: [Word]) {
        let recognizer = try engine.makePocketSphinxRecognizer(options: RecognizerOptions(volatileResults: partials))
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
    func cli(_ path: String, arguments extra: [String] = []) throws -> (cpu: Double, maxRSS: Int, text: String) {
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

    func cli(silence seconds: Double) throws -> (cpu: Double, maxRSS: Int, text: String) {
        let path = NSTemporaryDirectory() + "steno-bench-silence-\(getpid()).wav"
        try BenchWAV.write([Int16](repeating: 0, count: Int(seconds * 16000)), to: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try cli(path)
    }

    // MARK: Memory, start-up

    func memoryAndStartup() throws {
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

    // MARK: Files

    func loadReferenced() throws -> [BenchFile] {
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
    func loadOptionsSet() throws -> [BenchFile] {
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
    func references(_ path: String) throws -> [String: String] {
        var result: [String: String] = [:]
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            guard let open = line.lastIndex(of: "("), let close = line.lastIndex(of: ")"), open < close else { continue }
            let id = String(line[line.index(after: open)..<close])
            result[id] = String(line[..<open])
        }
        return result
    }

    func words(_ text: String) -> [String] {
        text.lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" })
            .map(String.init).filter { $0 != "<s>" && $0 != "</s>" && $0 != "<sil>" }
    }
}
