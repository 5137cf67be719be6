// The phrase benchmark: what a session's own vocabulary does for accuracy and what it costs.
//
//   steno-bench phrases [--boost B ...] [--quick] [--only accuracy|cost]
//
// Speech with names and uncommon words, and references:
// - librivox/: five LibriVox sentences of pocketsphinx-testdata (Tests/StenoSpeechTests/Resources),
//   with bench/phrases/phrases-librivox.txt (the names and uncommon words of their references);
// - bench/phrases/tts/: twelve sentences full of names and terms, spoken by festival's kal voice
//   (bench/phrases/make-tts-set.sh), with bench/phrases/phrases-tts.txt.
// For each set and boost: word error rate without and with its phrases, and the error rate on
// the phrase words alone (reference words that belong to a phrase, substituted or deleted);
// and the phrases' words given one by one (no sequences), at boost 1; and the other way of
// issue 14, no phrase model but the words the LM lacks added to the model's own LM with
// ps_add_word, on a fresh decoder for each list (the words stay in its LM for good).
// False alarms: each set with the *other* set's phrases (none of them is said), and cards/ and
// beckett.wav with both lists: WER must not rise by more than a point; the same with the
// lists' words added with ps_add_word.
// Cost: the CPU and wall time to make a session with 10, 100 and 1,000 phrases (the phrase
// model, the dictionary look-ups, festival for words the dictionary lacks), the CPU per audio
// second of a session with them, and the cost of moving a vocabulary in and out of a shared
// decoder at every utterance (a phrase session and a plain one taking turns on one decoder).
//
// Run from the package root, release build (`make bench` or `.build/release/steno-bench phrases`).

import Foundation
import StenoCore
import StenoSpeech

#if canImport(Glibc)
import Glibc
#endif

func runPhraseBench(_ arguments: [String]) {
    var boosts: [Double] = []
    var quick = false
    var only: String?
    var index = 0
    while index < arguments.count {
        switch arguments[index] {
        case "--boost" where index + 1 < arguments.count:
            boosts.append(Double(arguments[index + 1]) ?? 1)
            index += 1
        case "--quick": quick = true
        case "--only" where index + 1 < arguments.count && ["accuracy", "cost"].contains(arguments[index + 1]):
            only = arguments[index + 1]
            index += 1
        default:
            print("phrase bench: unknown argument \(arguments[index])")
            return
        }
        index += 1
    }
    do {
        try PhraseBench(boosts: boosts.isEmpty ? (quick ? [1] : [0.33, 1, 3]) : boosts, quick: quick, only: only).run()
    } catch {
        print("phrase bench failed: \(error)")
    }
}

private struct PhraseFile {
    let name: String
    let samples: [Float]
    let reference: [String]
    var seconds: Double { Double(samples.count) / 16000 }
}

private struct PhraseSet {
    let name: String
    let files: [PhraseFile]
    let phrases: [String]
}

private struct PhraseBench {
    let boosts: [Double]
    let quick: Bool
    /// "accuracy" or "cost": that part alone.
    let only: String?

    func run() throws {
        let root = FileManager.default.currentDirectoryPath
        let resources = root + "/Tests/StenoSpeechTests/Resources"
        let bench = root + "/bench/phrases"
        let librivox = PhraseSet(name: "LibriVox", files: try Self.load(directory: resources + "/librivox", transcription: "transcription"),
                                 phrases: try Self.lines(bench + "/phrases-librivox.txt"))
        let tts = PhraseSet(name: "TTS names", files: try Self.load(directory: bench + "/tts", transcription: "transcription"),
                            phrases: try Self.lines(bench + "/phrases-tts.txt"))
        var others = try Self.load(directory: resources + "/cards", transcription: "cards.transcription")
        others.append(PhraseFile(name: "beckett", samples: try Self.wav(resources + "/beckett.wav"),
                                 reference: normalizedWords("ever tried ever failed no matter try again fail again fail better")))
        let engine = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 2, preparedRecognizers: 2))
        if only != "cost" { try accuracy(librivox: librivox, tts: tts, others: others, engine: engine) }
        if only != "accuracy" { try costs(librivox: librivox, tts: tts, engine: engine) }
    }

    private func accuracy(librivox: PhraseSet, tts: PhraseSet, others: [PhraseFile], engine: PocketSphinxEngine) throws {
        print("\n## Phrases: accuracy (steno-bench phrases)\n")
        print("| speech | phrases | boost | WER | phrase-word errors |")
        print("|---|---|---|---|---|")
        var additions: [(String, LanguageModelAdditions)] = []
        // Phrase-word errors split into the words ps_add_word added and those the LM had.
        var split: [String] = []
        for set in [librivox, tts] {
            let plain = try score(set.files, phrases: [], boost: 1, engine: engine, phraseWords: Self.phraseWords(set.phrases))
            print("| \(set.name) (\(set.files.count) files) | none | – | \(plain.werText) | \(plain.phraseText) |")
            var ownScore: Score?
            for boost in boosts {
                let with = try score(set.files, phrases: set.phrases, boost: boost, engine: engine, phraseWords: Self.phraseWords(set.phrases))
                print("| \(set.name) | its own (\(set.phrases.count)) | \(boost) | \(with.werText) | \(with.phraseText) |")
                if boost == 1 { ownScore = with }
            }
            // The same words without their sequences: what the phrase model's bigrams and
            // trigrams add over making the words known and likely.
            var single: [String] = []
            for phrase in set.phrases {
                for word in phrase.split(separator: " ").map(String.init) where !single.contains(word) { single.append(word) }
            }
            if single.count != set.phrases.count {
                let words = try score(set.files, phrases: single, boost: 1, engine: engine, phraseWords: Self.phraseWords(set.phrases))
                print("| \(set.name) | its words, one by one (\(single.count)) | 1.0 | \(words.werText) | \(words.phraseText) |")
            }
            // The other way of issue 14: no phrase model, the words the LM lacks added to the
            // model's own LM with ps_add_word, on a decoder of its own (they stay there).
            let added = try scoreWithAddedWords(set.files, words: set.phrases, phraseWords: Self.phraseWords(set.phrases))
            additions.append((set.name + " list", added.additions))
            print("| \(set.name) | its words added to the LM with ps_add_word (\(added.additions.added) added, \(added.additions.known.count) in the LM already) | – | \(added.after.werText) | \(added.after.phraseText) |")
            let newWords = Set(added.additions.fromDictionary + added.additions.fromLetterToSound)
            let rows: [(String, Score?)] = [("none", plain), ("its own phrases, boost 1 (Steno)", ownScore), ("its words added with ps_add_word", added.after)]
            for (method, result) in rows {
                guard let result else { continue }
                let (addedErrors, addedWords) = Self.errors(of: newWords, in: set.files, result)
                let (knownErrors, knownWords) = Self.errors(of: Self.phraseWords(set.phrases).subtracting(newWords), in: set.files, result)
                split.append("| \(set.name) | \(method) | \(addedErrors)/\(addedWords) | \(knownErrors)/\(knownWords) |")
            }
            if added.before.errors != plain.errors || added.before.phraseErrors != plain.phraseErrors {
                print("| \(set.name) | (control: the same fresh decoder before the words went in, differs from *none*) | – | \(added.before.werText) | \(added.before.phraseText) |")
            }
        }

        print("\n## Phrases: false alarms (speech that says none of the phrases)\n")
        print("| speech | phrases given | boost | WER without | WER with | change |")
        print("|---|---|---|---|---|---|")
        let unrelated: [(String, [PhraseFile], String, [String])] = [
            ("LibriVox", librivox.files, "TTS list", tts.phrases),
            ("TTS names", tts.files, "LibriVox list", librivox.phrases),
            ("cards + beckett", others, "both lists", librivox.phrases + tts.phrases),
        ]
        for (speech, files, given, phrases) in unrelated {
            let plain = try score(files, phrases: [], boost: 1, engine: engine, phraseWords: [])
            for boost in boosts {
                let with = try score(files, phrases: phrases, boost: boost, engine: engine, phraseWords: [])
                let change = (with.wer - plain.wer) * 100
                print("| \(speech) | \(given) | \(boost) | \(plain.werText) | \(with.werText) | \(String(format: "%+.1f", change)) points |")
            }
            let added = try scoreWithAddedWords(files, words: phrases, phraseWords: [])
            let change = (added.after.wer - plain.wer) * 100
            print("| \(speech) | \(given), its words added to the LM with ps_add_word (\(added.additions.added)) | – | \(plain.werText) | \(added.after.werText) | \(String(format: "%+.1f", change)) points |")
            if added.before.errors != plain.errors {
                print("| \(speech) | (control: the same fresh decoder before the words went in) | – | \(plain.werText) | \(added.before.werText) | differs |")
            }
        }

        print("\nPhrase-word errors on the words ps_add_word added (the LM lacked them) and on those the LM had:\n")
        print("| speech | method | words added | words the LM had |")
        print("|---|---|---|---|")
        for row in split { print(row) }

        print("\nWords added with ps_add_word (no phrase model; each list on a fresh decoder of its own):\n")
        for (list, made) in additions {
            print("- \(list): \(made.added) added (\(made.fromDictionary.count) the dictionary had: \(made.fromDictionary.joined(separator: ", ")); "
                + "\(made.fromLetterToSound.count) by letter-to-sound: \(made.fromLetterToSound.joined(separator: ", "))); "
                + "\(made.known.count) the LM has already, which ps_add_word cannot raise: \(made.known.joined(separator: ", "))"
                + (made.unpronounced.isEmpty ? "" : "; no pronunciation: \(made.unpronounced.joined(separator: ", "))"))
        }
    }

    /// `files` without phrases on a fresh engine of one decoder whose language model has had
    /// the words of `phrases` it lacked added with `ps_add_word` (the engine is not shared with
    /// the other rows: the words stay in its LM). `before`: the same engine before the words
    /// went in (a control: it must equal the shared engine's plain score).
    func scoreWithAddedWords(_ files: [PhraseFile], words phrases: [String], phraseWords: Set<String>) throws
        -> (before: Score, after: Score, additions: LanguageModelAdditions) {
        let fresh = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 1, preparedRecognizers: 1))
        let before = try score(files, phrases: [], boost: 1, engine: fresh, phraseWords: phraseWords)
        let additions = try fresh.addWordsToLanguageModel(Vocabulary(phrases: phrases))
        let after = try score(files, phrases: [], boost: 1, engine: fresh, phraseWords: phraseWords)
        return (before, after, additions)
    }

    private func costs(librivox: PhraseSet, tts: PhraseSet, engine: PocketSphinxEngine) throws {
        print("\n## Phrases: cost\n")
        print("| phrases | make the session: CPU / wall | RTF without | RTF with | switches | per switch (in + out) |")
        print("|---|---|---|---|---|---|")
        let filler = try Self.fillerPhrases(count: 1000)
        for count in quick ? [10, 1000] : [10, 100, 1000] {
            let phrases = Array((librivox.phrases + filler).prefix(count))
            try cost(phrases, files: librivox.files, engine: engine)
        }
        // Words the dictionary lacks: festival pronounces them when the session is made.
        print("\nThe TTS list (\(tts.phrases.count) phrases, words festival pronounces among them):\n")
        try cost(tts.phrases, files: librivox.files, engine: engine)
    }

    struct Score {
        var errors = 0
        var words = 0
        var phraseErrors = 0
        var phraseWords = 0
        /// Each file's hypothesis words, in order.
        var hypotheses: [[String]] = []
        var wer: Double { words == 0 ? 0 : Double(errors) / Double(words) }
        var werText: String { String(format: "%.1f %% (%d/%d)", wer * 100, errors, words) }
        var phraseText: String {
            phraseWords == 0 ? "–" : String(format: "%.0f %% (%d/%d)", Double(phraseErrors) / Double(phraseWords) * 100, phraseErrors, phraseWords)
        }
    }

    func score(_ files: [PhraseFile], phrases: [String], boost: Double, engine: PocketSphinxEngine,
               phraseWords: Set<String>) throws -> Score {
        var total = Score()
        for file in files {
            // A fresh session per file, as the references are per file.
            let hypothesis = try recognize(file, phrases: phrases, boost: boost, engine: engine).words
            let (errors, missed) = Self.align(file.reference, hypothesis, phraseWords: phraseWords)
            total.errors += errors
            total.words += file.reference.count
            total.phraseErrors += missed
            total.phraseWords += file.reference.filter { phraseWords.contains($0) }.count
            total.hypotheses.append(hypothesis)
        }
        return total
    }

    func recognize(_ file: PhraseFile, phrases: [String], boost: Double, engine: PocketSphinxEngine) throws -> (words: [String], cpu: Double) {
        let vocabulary = phrases.isEmpty ? nil : try Vocabulary(phrases: phrases, boost: boost)
        let recognizer = try engine.makePocketSphinxRecognizer(options: RecognizerOptions(volatileResults: false, vocabulary: vocabulary))
        let began = Self.cpu()
        var events: [TranscriberEvent] = []
        var offset = 0
        while offset < file.samples.count {
            let end = min(file.samples.count, offset + 320)
            events += try recognizer.accept(Array(file.samples[offset..<end]))
            offset = end
        }
        events += try recognizer.finish()
        let cpu = Self.cpu() - began
        let text = events.compactMap { event -> String? in
            if case .final(let result) = event { return result.text }
            return nil
        }.joined(separator: " ")
        return (normalizedWords(text), cpu)
    }

    /// Making sessions with `phrases`, their CPU per audio second, and moving the vocabulary in
    /// and out of a shared decoder at each utterance.
    func cost(_ phrases: [String], files: [PhraseFile], engine: PocketSphinxEngine) throws {
        let vocabulary = try Vocabulary(phrases: phrases)
        var makeCPU = Double.infinity
        var makeWall = Double.infinity
        for _ in 0..<(quick ? 1 : 3) {
            let cpu = Self.cpu()
            let wall = Self.wall()
            _ = try engine.makePocketSphinxRecognizer(options: RecognizerOptions(vocabulary: vocabulary))
            makeCPU = min(makeCPU, Self.cpu() - cpu)
            makeWall = min(makeWall, Self.wall() - wall)
        }
        let audio = files.reduce(0) { $0 + $1.seconds }
        var plainCPU = Double.infinity
        var phraseCPU = Double.infinity
        for _ in 0..<(quick ? 1 : 3) {
            var plain = 0.0
            var with = 0.0
            for file in files {
                plain += try recognize(file, phrases: [], boost: 1, engine: engine).cpu
                with += try recognize(file, phrases: phrases, boost: 1, engine: engine).cpu
            }
            plainCPU = min(plainCPU, plain)
            phraseCPU = min(phraseCPU, with)
        }
        // Turns on one decoder: a phrase session and a plain one say the files in turn, an
        // utterance each, so every utterance moves the phrase vocabulary in or out; against the
        // same two sessions on decoders of their own (no moves).
        let shared = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 1))
        let ownA = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 1))
        let ownB = try PocketSphinxEngine(configuration: PocketSphinxConfiguration(recognizers: 1))
        func turns(_ a: PocketSphinxEngine, _ b: PocketSphinxEngine) throws -> Double {
            let phraseSession = try a.makePocketSphinxRecognizer(options: RecognizerOptions(volatileResults: false, vocabulary: vocabulary))
            let plainSession = try b.makePocketSphinxRecognizer(options: RecognizerOptions(volatileResults: false))
            let began = Self.cpu()
            for file in files {
                for session in [phraseSession, plainSession] {
                    _ = try session.accept(file.samples)
                    _ = try session.endUtterance()
                }
            }
            _ = try phraseSession.finish()
            _ = try plainSession.finish()
            return Self.cpu() - began
        }
        var moving = Double.infinity
        var staying = Double.infinity
        for _ in 0..<(quick ? 1 : 3) {
            moving = min(moving, try turns(shared, shared))
            staying = min(staying, try turns(ownA, ownB))
        }
        let utterances = 2 * files.count
        let perSwitch = max(0, moving - staying) / Double(files.count)
        print("| \(phrases.count) | \(Self.ms(makeCPU)) / \(Self.ms(makeWall)) | \(String(format: "%.3f", plainCPU / audio)) | \(String(format: "%.3f", phraseCPU / audio)) | \(utterances) | \(Self.ms(perSwitch)) |")
    }

    // MARK: Word error rate

    /// The reference words in `words` that `score`'s hypotheses substituted or deleted, and
    /// how many there are.
    static func errors(of words: Set<String>, in files: [PhraseFile], _ score: Score) -> (Int, Int) {
        var errors = 0
        var count = 0
        for (file, hypothesis) in zip(files, score.hypotheses) {
            errors += align(file.reference, hypothesis, phraseWords: words).phraseErrors
            count += file.reference.filter { words.contains($0) }.count
        }
        return (errors, count)
    }

    /// Edit distance between reference and hypothesis words, and how many reference words in
    /// `phraseWords` were substituted or deleted.
    static func align(_ reference: [String], _ hypothesis: [String], phraseWords: Set<String>) -> (errors: Int, phraseErrors: Int) {
        let n = reference.count
        let m = hypothesis.count
        var d = Array(repeating: Array(repeating: 0, count: m + 1), count: n + 1)
        for i in 0...n { d[i][0] = i }
        for j in 0...m { d[0][j] = j }
        if n > 0 && m > 0 {
            for i in 1...n {
                for j in 1...m {
                    let cost = reference[i - 1] == hypothesis[j - 1] ? 0 : 1
                    d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                }
            }
        }
        var i = n
        var j = m
        var phraseErrors = 0
        while i > 0 || j > 0 {
            if i > 0 && j > 0 && d[i][j] == d[i - 1][j - 1] + (reference[i - 1] == hypothesis[j - 1] ? 0 : 1) {
                if reference[i - 1] != hypothesis[j - 1] && phraseWords.contains(reference[i - 1]) { phraseErrors += 1 }
                i -= 1
                j -= 1
            } else if i > 0 && d[i][j] == d[i - 1][j] + 1 {
                if phraseWords.contains(reference[i - 1]) { phraseErrors += 1 }
                i -= 1
            } else {
                j -= 1
            }
        }
        return (d[n][m], phraseErrors)
    }

    static func phraseWords(_ phrases: [String]) -> Set<String> {
        Set(phrases.flatMap { normalizedWords($0) })
    }

    // MARK: Files

    static func lines(_ path: String) throws -> [String] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }

    /// Files named in a pocketsphinx-testdata style transcription: `<s> words </s> (name)`.
    static func load(directory: String, transcription: String) throws -> [PhraseFile] {
        try lines(directory + "/" + transcription).compactMap { line in
            guard let open = line.lastIndex(of: "("), let close = line.lastIndex(of: ")") else { return nil }
            let name = String(line[line.index(after: open)..<close])
            let text = line[..<open].replacingOccurrences(of: "<s>", with: "").replacingOccurrences(of: "</s>", with: "")
            return PhraseFile(name: name, samples: try wav(directory + "/" + name + ".wav"), reference: normalizedWords(text))
        }
    }

    /// A 16 kHz mono 16-bit WAV file's samples.
    static func wav(_ path: String) throws -> [Float] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var offset = 12
        while offset + 8 <= bytes.count {
            let id = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
            let size = Int(bytes[offset + 4]) | Int(bytes[offset + 5]) << 8 | Int(bytes[offset + 6]) << 16 | Int(bytes[offset + 7]) << 24
            if id == "data" {
                let end = min(bytes.count, offset + 8 + size)
                return stride(from: offset + 8, to: end - 1, by: 2).map {
                    Float(Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8)) / 32768
                }
            }
            offset += 8 + size + (size & 1)
        }
        throw NSError(domain: "steno-bench", code: 1, userInfo: [NSLocalizedDescriptionKey: "\(path): no data chunk"])
    }

    /// Two-word phrases of dictionary words, spread over the dictionary (deterministic).
    static func fillerPhrases(count: Int) throws -> [String] {
        let text = try String(contentsOfFile: PocketSphinxConfiguration().resolvedDictionary, encoding: .utf8)
        let words = text.split(separator: "\n").compactMap { line -> String? in
            guard let word = line.split(separator: " ").first, !word.contains("("),
                  word.allSatisfy({ $0.isLetter }) else { return nil }
            return String(word)
        }
        let step = max(1, words.count / (2 * count))
        return (0..<count).map { k in "\(words[(2 * k * step) % words.count]) \(words[((2 * k + 1) * step) % words.count])" }
    }

    static func cpu() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    static func wall() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    static func ms(_ seconds: Double) -> String { String(format: "%.0f ms", seconds * 1000) }
}
