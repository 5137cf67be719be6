// A session's own vocabulary (docs/protocol.md, `start`: "phrases", "boost",
// "pronunciations"): what the client expects to be said, checked here and nowhere else.

/// The words and word sequences a session expects (names, terms), how strongly to favour them,
/// and pronunciations the client gives for some of them. Validated: every bound below holds.
public struct Vocabulary: Sendable, Hashable {
    /// Each phrase as its words, as the client wrote them (punctuation around a word dropped).
    public private(set) var phrases: [[String]]
    /// How strongly the phrases are favoured: 1 is the default, tuned in bench/README.md
    /// ("Phrases"); more raises them further (and their false alarms).
    public private(set) var boost: Double
    /// Pronunciations by word (lowercased): phone names as the acoustic model writes them
    /// (`["S", "T", "EH", "N", "OW"]`). Checked against the model's phone set when the
    /// session starts (`unknownPhones(in:)`).
    public private(set) var pronunciations: [String: [String]]

    public static let maxPhrases = 1000
    public static let maxWordsPerPhrase = 10
    /// Characters in one word.
    public static let maxWordLength = 40
    public static let maxPronunciations = 1000
    /// Phones in one pronunciation.
    public static let maxPhones = 40
    public static let boostRange: ClosedRange<Double> = 0.01...10
    public static let defaultBoost = 1.0

    /// Checks and splits the client's phrases (`field` names the request field in errors).
    /// An empty phrase list with no pronunciations is allowed (it changes nothing).
    public init(phrases: [String], boost: Double? = nil, pronunciations: [(word: String, phones: String)] = [],
                field: String = "phrases") throws(StenoError) {
        guard phrases.count <= Self.maxPhrases else {
            throw StenoError(.badMessage, "field \"\(field)\" holds \(phrases.count) phrases; at most \(Self.maxPhrases) are allowed")
        }
        var split: [[String]] = []
        split.reserveCapacity(phrases.count)
        for (index, phrase) in phrases.enumerated() {
            let words = Self.words(of: phrase)
            let name = "\(field)[\(index)]"
            guard !words.isEmpty else {
                throw StenoError(.badMessage, "field \"\(name)\" has no words")
            }
            guard words.count <= Self.maxWordsPerPhrase else {
                throw StenoError(.badMessage,
                    "field \"\(name)\" has \(words.count) words; a phrase has at most \(Self.maxWordsPerPhrase)")
            }
            for word in words { try Self.check(word: word, in: name) }
            split.append(words)
        }
        self.phrases = split
        let boost = boost ?? Self.defaultBoost
        guard boost.isFinite, Self.boostRange.contains(boost) else {
            throw StenoError(.badMessage, "field \"boost\" must be a number from 0.01 to 10 (default 1)")
        }
        self.boost = boost
        guard pronunciations.count <= Self.maxPronunciations else {
            throw StenoError(.badMessage,
                "field \"pronunciations\" holds \(pronunciations.count) words; at most \(Self.maxPronunciations) are allowed")
        }
        var table: [String: [String]] = [:]
        for (word, phones) in pronunciations {
            let name = "pronunciations.\(clippedForError(word, 40))"
            let spoken = Self.words(of: word)
            guard spoken.count == 1, let key = spoken.first else {
                throw StenoError(.badMessage, "field \"\(name)\": a pronunciation is for one word")
            }
            try Self.check(word: key, in: name)
            let list = phones.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard !list.isEmpty, list.count <= Self.maxPhones else {
                throw StenoError(.badMessage,
                    "field \"\(name)\" must be 1 to \(Self.maxPhones) phones separated by spaces, such as \"S T EH N OW\"")
            }
            for phone in list where !(1...8).contains(phone.count) || !phone.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) {
                throw StenoError(.badMessage,
                    "field \"\(name)\": \"\(clippedForError(phone, 16))\" is not a phone name (letters such as AA, S, EH)")
            }
            table[Self.key(key)] = list.map { $0.uppercased() }
        }
        self.pronunciations = table
    }

    /// True when it asks for nothing (no phrases and no pronunciations).
    public var isEmpty: Bool { phrases.isEmpty && pronunciations.isEmpty }

    /// Every distinct word of the phrases and pronunciations, by `key(_:)`, with the first
    /// spelling the client used.
    public var spellings: [String: String] {
        var table: [String: String] = [:]
        for phrase in phrases {
            for word in phrase where table[Self.key(word)] == nil { table[Self.key(word)] = word }
        }
        for word in pronunciations.keys where table[word] == nil { table[word] = word }
        return table
    }

    /// The phones of the pronunciations that are not in `phones` (the acoustic model's set),
    /// as an error naming the first word that has one, or nil when all are known.
    public func unknownPhones(in phones: Set<String>) -> StenoError? {
        for word in pronunciations.keys.sorted() {
            for phone in pronunciations[word] ?? [] where !phones.contains(phone) {
                return StenoError(.badMessage,
                    "field \"pronunciations.\(clippedForError(word, 40))\": \"\(clippedForError(phone, 16))\" is not a phone of this model; its phones are "
                        + phones.sorted().joined(separator: " "))
            }
        }
        return nil
    }

    /// The words of a phrase: split at white space, with punctuation around each word left out
    /// (an apostrophe or hyphen inside a word stays: "don't", "ill-disposed").
    public static func words(of phrase: String) -> [String] {
        phrase.split(whereSeparator: { $0.isWhitespace }).compactMap { raw -> String? in
            var word = Substring(raw)
            while let first = word.first, isOuterPunctuation(first) { word.removeFirst() }
            while let last = word.last, isOuterPunctuation(last) { word.removeLast() }
            return word.isEmpty ? nil : String(word)
        }
    }

    /// How a word is looked up: lowercased.
    public static func key(_ word: String) -> String { word.lowercased() }

    private static func isOuterPunctuation(_ c: Character) -> Bool {
        c.isPunctuation || c.isSymbol
    }

    private static func check(word: String, in field: String) throws(StenoError) {
        guard word.count <= maxWordLength else {
            throw StenoError(.badMessage,
                "field \"\(field)\": the word \"\(clippedForError(word, 24))\" is longer than \(maxWordLength) characters")
        }
        guard word.contains(where: { $0.isLetter || $0.isNumber }),
              word.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "'" || $0 == "-" || $0 == "." }) else {
            throw StenoError(.badMessage,
                "field \"\(field)\": \"\(clippedForError(word, 24))\" is not a word (letters, digits, ' and - only)")
        }
    }

    /// Reads the `start` fields "phrases", "boost" and "pronunciations"; nil when none is given.
    public static func parse(phrases: JSONValue?, boost: JSONValue?, pronunciations: JSONValue?) throws(StenoError) -> Vocabulary? {
        func given(_ value: JSONValue?) -> JSONValue? { value == .null ? nil : value }
        guard given(phrases) != nil || given(pronunciations) != nil || given(boost) != nil else { return nil }
        var list: [String] = []
        if let phrases = given(phrases) {
            guard case .array(let items) = phrases else {
                throw StenoError(.badMessage, "field \"phrases\" must be an array of strings")
            }
            guard items.count <= maxPhrases else {
                throw StenoError(.badMessage, "field \"phrases\" holds \(items.count) phrases; at most \(maxPhrases) are allowed")
            }
            for (index, item) in items.enumerated() {
                guard case .string(let text) = item else {
                    throw StenoError(.badMessage, "field \"phrases[\(index)]\" must be a string")
                }
                guard text.utf8.count <= 1024 else {
                    throw StenoError(.badMessage, "field \"phrases[\(index)]\" is longer than 1024 bytes")
                }
                list.append(text)
            }
        }
        var boostValue: Double?
        if let boost = given(boost) {
            guard case .number(let number) = boost else {
                throw StenoError(.badMessage, "field \"boost\" must be a number from 0.01 to 10 (default 1)")
            }
            boostValue = number
        }
        var pairs: [(word: String, phones: String)] = []
        if let pronunciations = given(pronunciations) {
            guard case .object(let object) = pronunciations else {
                throw StenoError(.badMessage, "field \"pronunciations\" must be an object of word: \"PHONES\"")
            }
            guard object.count <= maxPronunciations else {
                throw StenoError(.badMessage,
                    "field \"pronunciations\" holds \(object.count) words; at most \(maxPronunciations) are allowed")
            }
            for key in object.keys {
                guard case .string(let phones)? = object[key] else {
                    throw StenoError(.badMessage, "field \"pronunciations.\(clippedForError(key, 40))\" must be a string of phones")
                }
                pairs.append((key, phones))
            }
        }
        return try Vocabulary(phrases: list, boost: boostValue, pronunciations: pairs)
    }
}
