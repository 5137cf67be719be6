import CPocketSphinx
import CPocketSphinxShims
import Foundation
import StenoCore
import StenoSystem

// A session's vocabulary on pocketsphinx (docs/architecture.md, "A session's vocabulary").
//
// Decoders are shared, so a session's phrases cannot live in one: they live in the session, as
// a small n-gram model of the phrases (`SessionVocabulary.model`) and a list of dictionary
// entries of its own, and are put into whichever decoder the session borrows
// (`PocketSphinxDecoder.use`) and taken out before another session's utterance runs on it.
//
// - The phrase model joins the decoder's language model set beside the model's own LM, with
//   weights 1 for the LM and `boost × phraseWeight` for the phrases (in probability, before
//   the language weight): the phrase words and word sequences gain probability and no other
//   word loses any (an added, not normalized, mix: measured at the default, it changed no
//   word of speech without the phrases; bench/README.md, "Phrases").
// - Words the dictionary has and the LM knows need nothing more: adding and removing the
//   phrase model costs ≈10 ms. Words the LM does not know, and words the client or the
//   letter-to-sound rules give a pronunciation of, change which words the search's lexicon
//   tree holds: entries of the session's own, named `~steno~N`, are added to the decoder's
//   dictionary (its dictionary has no removal, and another session may pronounce the same
//   word differently; unknown to every other session's LM, such entries are never searched
//   for them), and the tree is rebuilt (up to ≈0.5 s of CPU, bench/README.md) when the
//   session's vocabulary goes in and again when it goes out. A decoder keeps the last vocabulary put into it until the next
//   session needs another, and the pool lends a session the decoder that holds its vocabulary
//   when it is idle, so a phrase session alone on a server pays it once.
// - Results name the entries of the session's own by the client's spelling.

/// The part of a model a session's vocabulary is built against: the dictionary's
/// pronunciations, the words the language model knows, and the acoustic model's phones.
final class PocketSphinxLexicon: Sendable {
    /// The acoustic model's phones (without fillers and silence), for pronunciations.
    let phones: Set<String>
    /// Words the model's language model knows.
    let languageModelWords: Set<String>
    private let dictionaryPath: String
    private let dictionary = Locked<[String: [[String]]]?>(nil)

    init(decoder: PocketSphinxDecoder, configuration: PocketSphinxConfiguration) {
        dictionaryPath = configuration.resolvedDictionary
        phones = Self.readPhones(mdef: configuration.resolvedAcousticModel + "/mdef")
        languageModelWords = decoder.languageModelWords
    }

    /// The dictionary's pronunciations of `word` (lowercase), the first being the main one.
    /// The dictionary is read the first time a session has phrases (≈0.3 s, ≈15 MB).
    func pronunciations(of word: String) -> [[String]] {
        dictionary.withLock { table in
            if table == nil { table = Self.readDictionary(dictionaryPath) }
            return table?[word] ?? []
        }
    }

    private static func readDictionary(_ path: String) -> [String: [[String]]] {
        guard let data = FileManager.default.contents(atPath: path) else { return [:] }
        var table: [String: [[String]]] = [:]
        table.reserveCapacity(140_000)
        data.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            var lineStart = 0
            for index in 0...bytes.count {
                guard index == bytes.count || bytes[index] == UInt8(ascii: "\n") else { continue }
                defer { lineStart = index + 1 }
                guard index > lineStart else { continue }
                let line = String(decoding: UnsafeBufferPointer(rebasing: bytes[lineStart..<index]), as: UTF8.self)
                let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                guard fields.count >= 2 else { continue }
                var word = fields[0]
                if word.last == ")", let open = word.lastIndex(of: "("), open > word.startIndex { word = word[..<open] }
                table[String(word), default: []].append(fields.dropFirst().map(String.init))
            }
        }
        return table
    }

    /// Pronunciations for words the dictionary lacks (`key`s): a hyphenated word whose parts
    /// the dictionary has is said as its parts, the others get the letter-to-sound rules
    /// (festival, one process for all of them). Words with none found are not in the result;
    /// the phones found are not checked against the model's (`knows(phones:)`).
    func newWordPronunciations(_ words: [String]) -> [String: [String]] {
        let asked = words.filter { !$0.contains("-") || $0.split(separator: "-").contains { pronunciations(of: String($0)).isEmpty } }
        let rules = asked.isEmpty ? [:] : LetterToSound.pronounce(asked.map { $0.replacingOccurrences(of: "-", with: "") })
        var result: [String: [String]] = [:]
        for key in words {
            let parts = key.split(separator: "-").map(String.init)
            var phones: [String]? = rules[key.replacingOccurrences(of: "-", with: "")]
            if parts.count > 1, parts.allSatisfy({ !pronunciations(of: $0).isEmpty }) {
                phones = parts.flatMap { pronunciations(of: $0)[0] }
            }
            if let phones, !phones.isEmpty { result[key] = phones }
        }
        return result
    }

    /// Whether the acoustic model has every phone of `phones` (true when its phones could not
    /// be read: pronunciations are then checked when they go into a decoder).
    func knows(phones: [String]) -> Bool {
        self.phones.isEmpty || phones.allSatisfy { self.phones.contains($0) }
    }

    /// The context-independent phones of a binary `mdef` (sphinxbase's "BMDF" layout: a
    /// header, a format description, ten counts, then the phone names): what pronunciations
    /// may use. Empty when the file cannot be read (pronunciations are then checked when they
    /// go into a decoder).
    static func readPhones(mdef path: String) -> Set<String> {
        guard let data = FileManager.default.contents(atPath: path), data.count > 16 else { return [] }
        let bytes = [UInt8](data)
        guard bytes[0..<4].elementsEqual(Array("BMDF".utf8)) else { return [] }
        func int32(_ at: Int) -> Int? {
            guard at + 4 <= bytes.count else { return nil }
            let value = UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
            return Int(Int32(bitPattern: value))
        }
        guard let described = int32(8), described > 0, let count = int32(12 + described), (1...1000).contains(count) else { return [] }
        var at = 12 + described + 40
        var phones: Set<String> = []
        for _ in 0..<count {
            guard let end = bytes[at...].firstIndex(of: 0) else { return [] }
            let name = String(decoding: bytes[at..<end], as: UTF8.self)
            if !name.hasPrefix("+") && name != "SIL" { phones.insert(name) }
            at = end + 1
        }
        return phones
    }
}

/// Pronunciations for words the dictionary does not have: festival's letter-to-sound rules
/// for the CMU lexicon (Debian's `festival` and `festlex-cmu`), its phones mapped to the
/// pocketsphinx model's. One festival process per session that needs it (≈0.2 s CPU, ≈0.7 s
/// wall), run on the worker making the session's recognizer. Without festival such words are
/// left out, and the client is told.
enum LetterToSound {
    static let festival = "/usr/bin/festival"

    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: festival) }

    /// Phones for each word that festival could pronounce (lowercase ASCII letters and
    /// apostrophes only; others are not asked).
    static func pronounce(_ words: [String]) -> [String: [String]] {
        let asked = words.filter { word in !word.isEmpty && word.allSatisfy { ($0 >= "a" && $0 <= "z") || $0 == "'" } }
        guard !asked.isEmpty, isAvailable else { return [:] }
        // The CMU lexicon set up by name: festival defines it only when its default voice uses
        // it, and with some voices installed (Catalan, Finnish, Russian: bench/languages.py's)
        // it starts without it.
        var script = "(setup_cmu_lex)\n(lex.select 'cmu)\n"
        for word in asked {
            script += "(format t \"%s\\t%l\\n\" \"\(word)\" (lex.lookup \"\(word)\" nil))\n"
        }
        // A script file, not standard input: festival answers as it reads, and a pipe in each
        // direction could fill up with nobody reading.
        let path = NSTemporaryDirectory() + "steno-lts-\(getpid())-\(UInt64.random(in: 0...UInt64.max)).scm"
        guard FileManager.default.createFile(atPath: path, contents: Data(script.utf8)) else { return [:] }
        defer { try? FileManager.default.removeItem(atPath: path) }
        // A festival that hangs is killed after 30 s: the session then goes on without those
        // words. (`runChild`, not Foundation's `Process`, whose child would inherit the
        // server's ignored SIGTERM and outlive a `terminate()`.)
        guard let run = try? runChild(festival, ["--batch", path], timeout: 30), !run.timedOut else { return [:] }
        let text = run.stdout
        var result: [String: [String]] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "\t", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let phones = parse(String(parts[1]))
            if !phones.isEmpty { result[String(parts[0])] = phones }
        }
        return result
    }

    /// `("word" nil (((d ae) 1) ((sh w uh d) 1)))` → `D AE SH W UH D`: festival's phones,
    /// upper-cased, its schwas written as the model writes them.
    static func parse(_ entry: String) -> [String] {
        // The syllables start after the part of speech: everything from the third "(" on.
        var depth = 0
        var phones: [String] = []
        var token = ""
        var inQuotes = false
        for character in entry {
            if character == "\"" { inQuotes.toggle(); continue }
            if inQuotes { continue }
            switch character {
            case "(":
                depth += 1
            case ")", " ":
                if depth >= 4, !token.isEmpty, token.allSatisfy(\.isLetter) { phones.append(map(token)) }
                token = ""
                if character == ")" { depth -= 1 }
            default:
                token.append(character)
            }
        }
        return phones
    }

    private static func map(_ phone: String) -> String {
        switch phone {
        case "ax": return "AH"
        case "axr": return "ER"
        case "pau": return "SIL"
        default: return phone.uppercased()
        }
    }
}

/// One session's vocabulary, ready to go into any decoder of its engine: the phrase model,
/// the dictionary entries of its own, and how results name them.
final class SessionVocabulary: @unchecked Sendable {
    /// The phrase model (`ngram_model_t`), retained; used only by the decoder lent to its
    /// session (one at a time), which is why it can move between threads.
    let model: OpaquePointer
    /// Weight of the phrase model beside the LM's 1.
    let weight: Float
    /// Entries of its own for the decoders' dictionaries: name and phones.
    let entries: [(name: String, phones: String)]
    /// Whether putting it into a decoder changes the words the search holds (it has entries
    /// of its own, or words the LM does not know): the lexicon tree is then rebuilt.
    let changesSearch: Bool
    /// The client's spelling of each entry of its own.
    let spelling: [String: String]
    /// Words left out, and why, for the client.
    let notices: [StenoError]

    /// The weight of the phrase model at boost 1 (tuned in bench/README.md, "Phrases": 0.05
    /// left some phrase words misheard, 0.5 heard phrase words in speech without them).
    static let phraseWeight: Float = 0.15
    private static let serial = Locked(0)

    /// Builds the phrase model (written as an ARPA file and read back: this sphinxbase reads
    /// models only from files) against `lexicon`. Blocking: ≈1–30 ms, plus festival when
    /// words need letter-to-sound rules. Returns no vocabulary when no word is left (the
    /// notices say why).
    static func make(_ vocabulary: Vocabulary, lexicon: PocketSphinxLexicon, config: OpaquePointer,
                     logmath: OpaquePointer) throws(StenoError) -> (SessionVocabulary?, [StenoError]) {
        var notices: [StenoError] = []
        let made = try SessionVocabulary(vocabulary, lexicon: lexicon, config: config, logmath: logmath, notices: &notices)
        return (made, made?.notices ?? notices)
    }

    private init?(_ vocabulary: Vocabulary, lexicon: PocketSphinxLexicon, config: OpaquePointer, logmath: OpaquePointer,
                  notices: inout [StenoError]) throws(StenoError) {
        guard !vocabulary.isEmpty else { return nil }
        let session = Self.serial.withLock { value -> Int in value += 1; return value }
        var tokenOf: [String: String] = [:]      // word key → the token the phrase model uses
        var extraTokens: [String] = []           // dictionary words the phrase model also knows
        var entries: [(name: String, phones: String)] = []
        var spelling: [String: String] = [:]
        var changesSearch = false
        let spellings = vocabulary.spellings
        var unknown: [String] = []
        for key in spellings.keys.sorted() {
            let dictionary = lexicon.pronunciations(of: key)
            if let given = vocabulary.pronunciations[key] {
                if dictionary.contains(given) && lexicon.languageModelWords.contains(key) {
                    tokenOf[key] = key
                } else {
                    let name = "~steno\(session)~\(entries.count)"
                    entries.append((name, given.joined(separator: " ")))
                    spelling[name] = spellings[key] ?? key
                    tokenOf[key] = name
                    changesSearch = true
                    if !dictionary.isEmpty && lexicon.languageModelWords.contains(key) { extraTokens.append(key) }
                }
            } else if !dictionary.isEmpty {
                tokenOf[key] = key
                if !lexicon.languageModelWords.contains(key) { changesSearch = true }
            } else {
                unknown.append(key)
            }
        }
        // Words the dictionary lacks: letter-to-sound rules, or their parts.
        let found = lexicon.newWordPronunciations(unknown)
        for key in unknown {
            let phones = found[key]
            if let phones, !lexicon.knows(phones: phones) {
                notices.append(StenoError(.badMessage, "the pronunciation found for \"\(spellings[key] ?? key)\" uses phones this model lacks; it is left out"))
                continue
            }
            guard let phones, !phones.isEmpty else {
                notices.append(StenoError(.badMessage,
                    "no pronunciation is known for \"\(clippedForError(spellings[key] ?? key, 40))\"; it is left out of the phrases (give one in \"pronunciations\")"))
                continue
            }
            let name = "~steno\(session)~\(entries.count)"
            entries.append((name, phones.joined(separator: " ")))
            spelling[name] = spellings[key] ?? key
            tokenOf[key] = name
            changesSearch = true
        }
        let phrases: [[String]] = vocabulary.phrases.compactMap { words in
            let tokens = words.compactMap { tokenOf[Vocabulary.key($0)] }
            return tokens.count == words.count ? tokens : nil
        }
        let arpa = Self.arpa(phrases: phrases, extra: extraTokens + entries.map(\.name).filter { name in !phrases.joined().contains(name) })
        guard let arpa else { return nil }
        let path = NSTemporaryDirectory() + "steno-phrases-\(getpid())-\(session).arpa"
        guard FileManager.default.createFile(atPath: path, contents: Data(arpa.utf8)) else {
            throw StenoError(.internal, "cannot write the session's phrase model to \(path)")
        }
        defer { try? FileManager.default.removeItem(atPath: path) }
        PocketSphinxDecoder.lifecycleLock.lock()
        let model = ngram_model_read(config, path, NGRAM_ARPA, logmath)
        PocketSphinxDecoder.lifecycleLock.unlock()
        guard let model else {
            throw StenoError(.internal, "pocketsphinx could not read the session's phrase model")
        }
        self.model = model
        // The set adds its models' scores, each already raised to the language weight
        // (-lw): LM^lw + weight × phrases^lw (sphinxbase's ngram_model_set_score). A weight
        // of w^lw makes that LM^lw + (w × phrases)^lw, so the boost scales the phrase
        // model's probability, as a client would expect, not its lw-th power.
        let languageWeight = max(1, cmd_ln_float_r(config, "-lw"))
        self.weight = Float(pow(Double(Self.phraseWeight) * vocabulary.boost, languageWeight))
        self.entries = entries
        self.changesSearch = changesSearch
        self.spelling = spelling
        self.notices = notices
    }

    deinit {
        PocketSphinxDecoder.lifecycleLock.lock()
        ngram_model_free(model)
        PocketSphinxDecoder.lifecycleLock.unlock()
    }

    /// The phrases as an ARPA trigram model: unigrams by their count among the phrases'
    /// words, bigrams and trigrams inside phrases with half the mass of their history (the
    /// other half backs off). `extra` are words known on their own (no phrase holds them).
    static func arpa(phrases: [[String]], extra: [String]) -> String? {
        var unigrams: [String: Int] = [:]
        var bigrams: [String: [String: Int]] = [:]
        var trigrams: [String: [String: Int]] = [:]
        var order: [String] = []
        func count(_ word: String) {
            if unigrams[word] == nil { order.append(word) }
            unigrams[word, default: 0] += 1
        }
        for words in phrases {
            for (index, word) in words.enumerated() {
                count(word)
                if index >= 1 { bigrams[words[index - 1], default: [:]][word, default: 0] += 1 }
                if index >= 2 { trigrams[words[index - 2] + " " + words[index - 1], default: [:]][word, default: 0] += 1 }
            }
        }
        for word in extra where unigrams[word] == nil { count(word) }
        guard !order.isEmpty else { return nil }
        let total = Double(unigrams.values.reduce(0, +))
        let bigramCount = bigrams.values.reduce(0) { $0 + $1.count }
        let trigramCount = trigrams.values.reduce(0) { $0 + $1.count }
        func log10(_ x: Double) -> String { String(format: "%.4f", Foundation.log10(x)) }
        var text = "\\data\\\nngram 1=\(order.count)\n"
        if bigramCount > 0 { text += "ngram 2=\(bigramCount)\n" }
        if trigramCount > 0 { text += "ngram 3=\(trigramCount)\n" }
        text += "\n\\1-grams:\n"
        for word in order {
            text += "\(log10(Double(unigrams[word] ?? 1) / total)) \(word)"
            if bigramCount > 0 { text += bigrams[word] != nil ? " \(log10(0.5))" : " 0.0000" }
            text += "\n"
        }
        if bigramCount > 0 {
            text += "\n\\2-grams:\n"
            for first in order {
                guard let next = bigrams[first] else { continue }
                let sum = Double(next.values.reduce(0, +))
                for second in order where next[second] != nil {
                    text += "\(log10(0.5 * Double(next[second] ?? 1) / sum)) \(first) \(second)"
                    if trigramCount > 0 { text += trigrams[first + " " + second] != nil ? " \(log10(0.5))" : " 0.0000" }
                    text += "\n"
                }
            }
        }
        if trigramCount > 0 {
            text += "\n\\3-grams:\n"
            for history in trigrams.keys.sorted() {
                guard let next = trigrams[history] else { continue }
                let sum = Double(next.values.reduce(0, +))
                for word in next.keys.sorted() {
                    text += "\(log10(0.5 * Double(next[word] ?? 1) / sum)) \(history) \(word)\n"
                }
            }
        }
        return text + "\n\\end\\\n"
    }
}
