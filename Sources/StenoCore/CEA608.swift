/// CEA-608 ("line 21") captions as byte pairs, on caption channel 1 (CC1): the character set,
/// the control codes, odd parity, and a caption row written as pairs. SCC files carry these
/// pairs; broadcast inserters (OBS among them) put them into the video stream.
///
/// A pair is sent in one video frame (29.97 a second). Control codes and the special and
/// extended characters are sent twice in a row, as broadcast practice has it: a decoder that
/// sees the same code twice acts once, so a pair lost to noise costs nothing.
public enum CEA608 {
    /// Characters in a caption row.
    public static let columns = 32
    /// Rows a caption may use (of the screen's 15).
    public static let maxRows = 4

    /// A 608 pair as a 16-bit word: first byte high, both with odd parity.
    public typealias Pair = UInt16

    /// The control codes of channel 1 (`0x14, code`).
    public enum Command: UInt8, Sendable {
        case resumeCaptionLoading = 0x20
        case backspace = 0x21
        case rollUp2 = 0x25
        case rollUp3 = 0x26
        case rollUp4 = 0x27
        case eraseDisplayedMemory = 0x2C
        case carriageReturn = 0x2D
        case eraseNonDisplayedMemory = 0x2E
        case endOfCaption = 0x2F
    }

    /// A byte with bit 7 set or clear so that it has an odd number of ones.
    static func odd(_ byte: UInt8) -> UInt8 {
        let low = byte & 0x7F
        return low.nonzeroBitCount % 2 == 0 ? low | 0x80 : low
    }

    static func pair(_ first: UInt8, _ second: UInt8) -> Pair {
        Pair(odd(first)) << 8 | Pair(odd(second))
    }

    /// A control code, sent twice.
    public static func command(_ command: Command) -> [Pair] {
        let code = pair(0x14, command.rawValue)
        return [code, code]
    }

    /// The preamble address code that puts the cursor at `row` (1...15) and `column`
    /// (0...31), white text, sent twice, followed by a tab offset when the column is not a
    /// multiple of 4 (preambles address every fourth column).
    public static func position(row: Int, column: Int) -> [Pair] {
        let rows: [(UInt8, UInt8)] = [(0x11, 0x40), (0x11, 0x60), (0x12, 0x40), (0x12, 0x60), (0x15, 0x40),
                                      (0x15, 0x60), (0x16, 0x40), (0x16, 0x60), (0x17, 0x40), (0x17, 0x60),
                                      (0x10, 0x40), (0x13, 0x40), (0x13, 0x60), (0x14, 0x40), (0x14, 0x60)]
        let (first, base) = rows[min(max(row, 1), 15) - 1]
        let column = min(max(column, 0), columns - 1)
        let address = pair(first, base + 0x10 + UInt8(column / 4) * 2)
        var out = [address, address]
        if column % 4 > 0 {
            let tab = pair(0x17, 0x20 + UInt8(column % 4))
            out += [tab, tab]
        }
        return out
    }

    /// How one character is written.
    enum Glyph: Equatable {
        /// A character of the basic set: one byte.
        case basic(UInt8)
        /// A special character (`0x11, code`), sent twice.
        case special(UInt8)
        /// An extended character (`set, code`, set 0x12 or 0x13), sent twice after `fallback`,
        /// the basic character a decoder without it shows (one that has it backs over it).
        case extended(UInt8, UInt8, fallback: UInt8)
    }

    /// The basic set is ASCII but for ten codes, which hold these.
    private static let basicOverrides: [Character: UInt8] = [
        "á": 0x2A, "é": 0x5C, "í": 0x5E, "ó": 0x5F, "ú": 0x60, "ç": 0x7B, "÷": 0x7C, "Ñ": 0x7D, "ñ": 0x7E, "█": 0x7F,
    ]
    /// ASCII characters whose codes the basic set gives to others (above); the extended sets have them.
    private static let displacedASCII: Set<UInt8> = [0x2A, 0x5C, 0x5E, 0x5F, 0x60, 0x7B, 0x7C, 0x7D, 0x7E, 0x7F]

    private static let specials: [Character] = ["®", "°", "½", "¿", "™", "¢", "£", "♪", "à", "\u{A0}", "è", "â", "ê", "î", "ô", "û"]
    private static let extended2: [Character] = ["Á", "É", "Ó", "Ú", "Ü", "ü", "‘", "¡", "*", "'", "—", "©", "℠", "•", "“", "”",
                                                 "À", "Â", "Ç", "È", "Ê", "Ë", "ë", "Î", "Ï", "ï", "Ô", "Ù", "ù", "Û", "«", "»"]
    private static let extended3: [Character] = ["Ã", "ã", "Í", "Ì", "ì", "Ò", "ò", "Õ", "õ", "{", "}", "\\", "^", "_", "|", "~",
                                                 "Ä", "ä", "Ö", "ö", "ß", "¥", "¤", "¦", "Å", "å", "Ø", "ø", "┌", "┐", "└", "┘"]
    /// What a decoder without the extended sets shows for their characters.
    private static let extendedFallbacks: [Character: Character] = [
        "‘": "'", "¡": "!", "*": ".", "—": "-", "©": "c", "℠": "s", "•": ".", "“": "\"", "”": "\"", "«": "\"", "»": "\"",
        "{": "(", "}": ")", "\\": "/", "^": " ", "_": "-", "|": "!", "~": "-", "¥": "Y", "¤": "$", "¦": "!",
        "┌": "+", "┐": "+", "└": "+", "┘": "+", "ß": "s",
    ]

    /// How `character` is written; nil when 608 has no such character (see `transliterated`).
    static func glyph(_ character: Character) -> Glyph? {
        if let code = basicOverrides[character] { return .basic(code) }
        if let ascii = character.asciiValue, ascii >= 0x20, ascii < 0x7F, !displacedASCII.contains(ascii) {
            return .basic(ascii)
        }
        if let index = specials.firstIndex(of: character) { return .special(0x30 + UInt8(index)) }
        for (set, table) in [(UInt8(0x12), extended2), (UInt8(0x13), extended3)] {
            if let index = table.firstIndex(of: character) {
                let fallback = extendedFallbacks[character] ?? transliterated(character).first ?? "?"
                return .extended(set, 0x20 + UInt8(index), fallback: fallback.asciiValue ?? 0x3F)
            }
        }
        return nil
    }

    /// Text in characters 608 has: its own characters as they are, Latin letters with marks
    /// it lacks as the plain letter ("ą" → "a", "Ł" → "L"), typographic punctuation as its
    /// ASCII kin, and anything else as "?".
    public static func transliterated(_ text: String) -> String {
        var out = ""
        for character in text {
            if glyph(character) != nil { out.append(character) } else { out += transliterated(character) }
        }
        return out
    }

    private static func transliterated(_ character: Character) -> String {
        switch character {
        case "’", "ʼ", "′": return "'"
        case "„", "″": return "\""
        case "–", "‒", "―", "−": return "-"
        case "…": return "..."
        case "\u{2009}", "\u{202F}", "\t", "\n": return " "
        default: break
        }
        // A Latin letter with marks: its Unicode name says which letter it is.
        guard let scalar = character.unicodeScalars.first, let name = scalar.properties.name else { return "?" }
        for (prefix, lower) in [("LATIN SMALL LETTER ", true), ("LATIN CAPITAL LETTER ", false)] where name.hasPrefix(prefix) {
            let rest = name.dropFirst(prefix.count)
            let letter = rest.prefix { $0 != " " }
            if letter.count == 1, let first = letter.first {
                let plain = lower ? String(first).lowercased() : String(first)
                if let base = plain.first, glyph(base) != nil { return plain }
            }
        }
        return "?"
    }

    /// The pairs that write `text` (already in 608's characters, see `transliterated`) from the
    /// cursor on: basic characters two to a pair (the last one padded), special and extended
    /// characters in pairs of their own, sent twice.
    public static func pairs(writing text: String) -> [Pair] {
        var out: [Pair] = []
        var waiting: UInt8?
        func put(_ byte: UInt8) {
            if let first = waiting {
                out.append(pair(first, byte))
                waiting = nil
            } else {
                waiting = byte
            }
        }
        func flush() {
            if let first = waiting { out.append(pair(first, 0)) }
            waiting = nil
        }
        for character in text {
            switch glyph(character) ?? .basic(0x3F) {
            case .basic(let byte):
                put(byte)
            case .special(let code):
                flush()
                let code = pair(0x11, code)
                out += [code, code]
            case .extended(let set, let code, let fallback):
                put(fallback)
                flush()
                let code = pair(set, code)
                out += [code, code]
            }
        }
        flush()
        return out
    }

    /// A pair as SCC writes it: four lowercase hex digits.
    public static func hex(_ pair: Pair) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(pair >> 12)], digits[Int(pair >> 8 & 15)], digits[Int(pair >> 4 & 15)], digits[Int(pair & 15)]])
    }
}
